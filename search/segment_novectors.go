//go:build !vectors

package search

// zapVectors: without the "vectors" tag zapx writes the sections segSections lists.
const zapVectors = false
