//go:build !linux

package search

const (
	adviceRandom   = 0
	adviceWillNeed = 0
	adviceDontNeed = 0
)

// advise does nothing off Linux: the advice is about Linux's read-ahead and page tables.
func advise([]byte, int) {}
