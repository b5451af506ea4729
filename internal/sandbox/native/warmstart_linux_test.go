package native_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestWarmstartStartsAnInitThatWaits: warmstart.Start (what a
// supervisor's initializer calls) starts the agentrun binary as a
// sandbox init in the warm role, in pid, mount and network namespaces of
// its own (and a user namespace, unprivileged), killed with its parent's
// fork thread; it waits for its files without exiting, and End ends it.
func TestWarmstartStartsAnInitThatWaits(t *testing.T) {
	requireNative(t)
	if native.Name != warmstart.Backend {
		t.Fatalf("warmstart.Backend %q is not the native backend's name %q", warmstart.Backend, native.Name)
	}
	in, err := warmstart.Start(testsupport.Agentrun(t))
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(in.Proc.Pid)
	time.Sleep(200 * time.Millisecond) // it is up, and waits for its files
	b, err := os.ReadFile("/proc/" + pid + "/cmdline")
	if err != nil {
		t.Fatalf("the init exited: %v", err)
	}
	if got := strings.ReplaceAll(string(b), "\x00", " "); got != "agentrun __sandbox init "+warmstart.RoleWarm+" " {
		t.Errorf("the init's command line is %q", got)
	}
	nss := []string{"pid", "mnt", "net", "uts", "ipc"}
	if os.Getuid() != 0 {
		nss = append(nss, "user")
	}
	for _, ns := range nss {
		ours, _ := os.Readlink("/proc/self/ns/" + ns)
		theirs, err := os.Readlink("/proc/" + pid + "/ns/" + ns)
		if err != nil || theirs == ours {
			t.Errorf("the init's %s namespace is %q (%v), ours %q: want one of its own", ns, theirs, err, ours)
		}
	}
	if in.Spawn == 0 || in.Spawned < in.Spawn {
		t.Errorf("the start's marks: spawn %d, spawned %d", in.Spawn, in.Spawned)
	}
	in.End()
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Errorf("the init (pid %s) is still there after End", pid)
	}
}
