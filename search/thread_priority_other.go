//go:build !linux

package search

import "errors"

// LowerThreadPriority is Linux-only: elsewhere niceness belongs to the whole process.
func LowerThreadPriority(int) error {
	return errors.New("per-thread priority is only supported on Linux")
}
