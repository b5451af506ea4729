package native

import (
	"os/exec"

	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
)

// startOnForkThread starts cmd from the thread every init is forked from
// (package warmstart): Pdeathsig then ties the init to this process, and
// as root the thread's bounding set is empty, so the init's starts empty.
func startOnForkThread(cmd *exec.Cmd) error {
	var err error
	warmstart.OnForkThread(func() { err = cmd.Start() })
	return err
}
