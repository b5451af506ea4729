package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSubmitWaitProgress: submit --wait says on stderr where the run is,
// one line per phase when piped, and a line redrawn in place on a
// terminal; stdout stays the result alone.
func TestSubmitWaitProgress(t *testing.T) {
	e := newEnv(t)
	agent := "sleep 0.5; echo x > x.txt"
	res := e.run("submit", "--sandbox", "host", "--agent-cmd", agent, "--check", "x=test -f x.txt", "--wait", "progress")
	must(t, res, 0)
	for _, want := range []string{"] preparing", "] sandbox started (host)", "] attempt 1 of 2: the agent is working", "] attempt 1: completed", "check x: passed", "] exporting"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("piped progress lacks %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, "\r") || strings.Contains(res.stdout, "[0:") {
		t.Errorf("piped progress redraws, or went to stdout:\nstdout %q\nstderr %q", res.stdout, res.stderr)
	}
	// status shows each phase's duration.
	id := between(res.stdout, "run ", " ")
	st := e.run("status", id)
	if !strings.Contains(st.stdout, "phases") || !strings.Contains(st.stdout, "attempt 1 ") || !strings.Contains(st.stdout, "check x ") {
		t.Errorf("status lacks the phases:\n%s", st.stdout)
	}

	// On a terminal: the phase line is redrawn (CR, erase line).
	m, s := openPTY(t)
	cmd := exec.Command(e.bin, "submit", "--sandbox", "host", "--agent-cmd", "sleep 1; echo y > y.txt", "--wait", "progress on a tty")
	cmd.Dir, cmd.Env = e.repo, append(append([]string{}, e.vars...), "TERM=xterm")
	var so bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, s
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var tty bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&tty, m); close(done) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, so.String())
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	out := tty.String()
	if !strings.Contains(out, "\r\x1b[K") || !strings.Contains(out, "the agent is working (") {
		t.Errorf("no progress redrawn on the terminal: %q", out)
	}
	if strings.Contains(so.String(), "\x1b[K") {
		t.Errorf("progress reached stdout: %q", so.String())
	}
}

// openPTY opens a real pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		requireCaps(t, "a pseudo-terminal", false, err.Error())
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		requireCaps(t, "a pseudo-terminal", false, err.Error())
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		requireCaps(t, "a pseudo-terminal", false, err.Error())
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		requireCaps(t, "a pseudo-terminal", false, err.Error())
	}
	t.Cleanup(func() { m.Close() })
	return m, s
}
