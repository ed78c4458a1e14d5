package benchkit

import (
	"os/exec"
	"syscall"
)

// DieWithParent has the kernel kill cmd's process when the benchmark that started it
// dies, however it dies (a signal, SIGPIPE into `| head`): otherwise the server it
// measured stays behind, idle but holding memory and skewing the next measurements.
// Call it before cmd.Start.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
