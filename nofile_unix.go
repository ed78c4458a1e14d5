//go:build unix

package main

import "syscall"

// openFileLimit is the process's limit of open files (RLIMIT_NOFILE), 0 when unknown. Go
// raises the soft limit to the hard one when the program starts (since Go 1.19), so this
// is what the server can use.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return uint64(l.Cur)
}
