package benchkit

import "time"

// Pct is the p-th percentile of sorted latencies (0 for none): the nearest rank, so p99 of
// a hundred samples is the largest.
func Pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// Ms is d in milliseconds, to the microsecond, for reports.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
