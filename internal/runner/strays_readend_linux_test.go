package runner

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner/deathwatch"
)

// TestStraysAreWhatHoldsTheWriteEnd: a command's strays are the processes
// that hold its marker's write end. A child of the runner's process that
// holds the read end (as any child does between its fork and its exec: a
// git process the supervisor starts while another run's strays are
// hunted) is spared; the stray that holds the write end dies.
func TestStraysAreWhatHoldsTheWriteEnd(t *testing.T) {
	m := newMarker()
	if m == nil {
		t.Fatal("no marker")
	}
	start := func(f *os.File) *exec.Cmd {
		cmd := exec.Command("sleep", "30")
		cmd.ExtraFiles = []*os.File{f}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // out of any group the runner kills
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	stray := start(m.w)
	// The read end again, as a description of its own: handing m.r
	// itself to a child would make it blocking (Fd), which the runner's
	// reads of it never expect.
	var rfd uintptr
	rc, err := m.r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Control(func(fd uintptr) { rfd = fd })
	readEnd, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(rfd)), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer readEnd.Close()
	bystander := start(readEnd)
	strayDone := make(chan error, 1)
	go func() { strayDone <- stray.Wait() }()

	m.killStrays(0, 5*time.Second)

	select {
	case <-strayDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the stray that holds the marker's write end was not killed")
	}
	if st, ok := deathwatch.ReadStat(strconv.Itoa(bystander.Process.Pid)); !ok || st.State == 'Z' {
		t.Fatalf("the child that holds only the read end was killed (stat %+v, %v)", st, ok)
	}
}
