package benchkit

import (
	"os"
	"os/exec"
	"testing"
)

// TreeCPU must count the CPU of children that have ended (PostgreSQL's backends come and
// go), not only the process's own.
func TestTreeCPUCountsEndedChildren(t *testing.T) {
	before, err := TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := child.Run(); err != nil {
		t.Skip("no sh to burn CPU with:", err)
	}
	childCPU := child.ProcessState.UserTime() + child.ProcessState.SystemTime()
	after, err := TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if childCPU < 50e6 {
		t.Skipf("the child used only %v", childCPU)
	}
	if after-before < childCPU/2 {
		t.Errorf("TreeCPU grew by %v while a child used %v", after-before, childCPU)
	}
}
