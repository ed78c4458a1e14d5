package server

import "syscall"

// lowerThreadPriority adds nice to the calling thread's niceness. On Linux niceness
// belongs to a thread, so PRIO_PROCESS with a thread id changes that thread only. The
// caller keeps its goroutine locked to the thread for as long as the thread lives, or the
// lowered priority passes to whatever Go runs there next.
func lowerThreadPriority(nice int) error {
	tid := syscall.Gettid()
	cur, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return err
	}
	// The raw syscall returns 20 - niceness, so that no valid value looks like an error.
	return syscall.Setpriority(syscall.PRIO_PROCESS, tid, 20-cur+nice)
}
