//go:build vectors

package search

// zapVectors: with the "vectors" tag zapx writes a vector section for every field too;
// those segments are left to zapx.
const zapVectors = true
