package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// A descriptor that the submitter holds without close-on-exec (a shell's,
// an editor's or a harness's pipe: Go, like a shell, hands those to every
// child) stays with the submitter. The detached supervisor and the
// sandbox do not keep it: its reader sees the end once the submit has
// exited, while the run goes on, and the agent never has it.
func TestSubmitterDescriptorsStayOut(t *testing.T) {
	e := newEnv(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const leaked = "12"
	var out bytes.Buffer
	cmd := exec.Command(e.bin, "submit", "--json", "--network", "none",
		"--agent-cmd", "ls /proc/self/fd > fds.txt; sleep 8", "list the agent's descriptors")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = e.repo, e.vars, &out, &out
	cmd.ExtraFiles = make([]*os.File, 10)
	cmd.ExtraFiles[9] = w // the submit's fd 12, not close-on-exec
	err = cmd.Run()
	w.Close()
	if err != nil {
		if strings.Contains(out.String(), "sandbox_preflight") {
			requireCaps(t, "the native sandbox", false, out.String())
		}
		t.Fatalf("submit: %v\n%s", err, out.String())
	}
	id := between(out.String(), `"id": "`, `"`)
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("the pipe's reader, once the submit has exited: %d %v, want its end (a process of run %s holds the submit's fd %s)\n%s", n, err, id, leaked, e.supervisorLog(id))
	}
	if s := e.get(id).State; s.Terminal() {
		t.Fatalf("run %s ended (%s) before the pipe did: the test proves nothing", id, s)
	}
	got := e.waitFor(id, "the run's end", func(r *run.Run) bool { return r.State.Terminal() })
	if got.State != run.StateSucceeded {
		t.Fatalf("run %s: %s: %s", id, got.State, got.Message)
	}
	fds := strings.Fields(testsupport.Git(t, e.repo, "show", got.Branch+":fds.txt"))
	for _, fd := range fds {
		if fd == leaked {
			t.Fatalf("the agent has the submit's fd %s: %v", leaked, fds)
		}
	}
	// stdin, stdout, stderr, and ls's own listing of /proc/self/fd.
	if strings.Join(fds, " ") != "0 1 2 3" {
		t.Fatalf("the agent's descriptors: %v, want 0 1 2 (and ls's 3)", fds)
	}
}
