//go:build !linux

package search

const (
	adviceRandom   = 0
	adviceWillNeed = 0
)

// advise does nothing off Linux: the advice is an optimisation of Linux's read-ahead.
func advise([]byte, int) {}
