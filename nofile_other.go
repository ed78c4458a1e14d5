//go:build !unix

package main

// openFileLimit is unknown here: the HTTP connection cap is taken as configured.
func openFileLimit() uint64 { return 0 }
