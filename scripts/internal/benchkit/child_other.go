//go:build !linux

package benchkit

import "os/exec"

// DieWithParent is Linux's parent-death signal (child_linux.go); elsewhere a benchmark
// that dies may leave its server behind.
func DieWithParent(cmd *exec.Cmd) {}
