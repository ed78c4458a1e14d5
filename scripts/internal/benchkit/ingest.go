package benchkit

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// IngestResult is one SMTP ingest measurement.
type IngestResult struct {
	N        int // messages accepted
	Elapsed  time.Duration
	P50, P99 time.Duration // per message, MAIL FROM to the 250 after the data
}

// Rate is accepted messages per second.
func (r IngestResult) Rate() float64 { return float64(r.N) / r.Elapsed.Seconds() }

// Ingest sends msgs[i] to to[i] over conns pipelined SMTP connections, taking the next
// message as a connection frees up; the clock runs until the last 250. No message is
// started after limit (0: no limit): a slow server is measured on fewer messages rather
// than making the run long. The first error ends the measurement.
func Ingest(addr string, msgs [][]byte, to []string, conns int, limit time.Duration) (IngestResult, error) {
	return IngestTo([]string{addr}, msgs, to, conns, limit)
}

// IngestTo is Ingest with the connections dealt in turn to the listeners at addrs: mail
// split between several processes on one database.
func IngestTo(addrs []string, msgs [][]byte, to []string, conns int, limit time.Duration) (IngestResult, error) {
	var next, done atomic.Int64
	lat := make([][]time.Duration, conns)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := dialSMTP(addrs[c%len(addrs)])
			if err != nil {
				errs <- err
				return
			}
			defer s.close()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(msgs) || (limit > 0 && time.Since(start) > limit) {
					return
				}
				t := time.Now()
				if err := s.send("sender@"+SenderDomain, to[i], msgs[i]); err != nil {
					errs <- fmt.Errorf("message %d: %w", i, err)
					return
				}
				done.Add(1)
				lat[c] = append(lat[c], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		return IngestResult{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	return IngestResult{N: int(done.Load()), Elapsed: elapsed, P50: Pct(all, 50), P99: Pct(all, 99)}, nil
}
