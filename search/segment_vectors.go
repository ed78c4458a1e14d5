//go:build vectors

package search

// With the "vectors" tag zapx writes a vector section for every field too: leave those
// segments to zapx.
func init() { segSections = nil }
