//go:build !linux

package server

import "errors"

// lowerThreadPriority is Linux-only: elsewhere niceness belongs to the whole process.
func lowerThreadPriority(int) error {
	return errors.New("per-thread priority is only supported on Linux")
}
