package native_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// TestDiskBoundTmpfs: /tmp and /dev/shm are tmpfs bounded by the disk
// bound (bytes and inodes): writing past it fails with ENOSPC.
func TestDiskBoundTmpfs(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	spec.Limits.DiskBytes = 8 << 20
	spec.Limits.DiskInodes = 300
	// Each place on its own: the host's sampler counts the tmpfs too and
	// may stop the sandbox first, which holds the bound as well.
	run := func(script string) (result, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var out, errb strings.Builder
		code, enf, err := b.Command(ctx, spec, []string{"/bin/sh", "-c", script}, nil, &out, &errb)
		if errors.Is(err, sandbox.ErrDiskExceeded) {
			t.Logf("the sampler stopped the sandbox first: %v", err)
			return result{}, true
		}
		if err != nil {
			t.Fatalf("sandbox: %v", err)
		}
		return result{code: code, stdout: out.String(), stderr: errb.String(), enforced: enf}, false
	}
	for _, d := range []string{"/tmp", "/dev/shm"} {
		r, killed := run(`head -c 5000000 /dev/zero > ` + d + `/a; head -c 5000000 /dev/zero > ` + d + `/b 2>/dev/null; echo "rc=$? $(cat ` + d + `/a ` + d + `/b | wc -c)"`)
		if !killed {
			var rc, n int
			fmt.Sscanf(strings.TrimSpace(r.stdout), "rc=%d %d", &rc, &n)
			if rc == 0 || n > 8<<20 {
				t.Errorf("%s took %d bytes past an 8 MiB disk bound (exit %d):\n%v", d, n, rc, r)
			}
			if v := r.enforced["disk_tmpfs"]; !strings.HasPrefix(v, "enforced") {
				t.Errorf("Enforced[disk_tmpfs] = %q", v)
			}
		}
		r, killed = run(`mkdir ` + d + `/many; i=0; while [ $i -lt 1000 ] && true > ` + d + `/many/$i 2>/dev/null; do i=$((i+1)); done; echo "files=$i"`)
		if !killed {
			var files int
			fmt.Sscanf(strings.TrimSpace(r.stdout), "files=%d", &files)
			if files >= 1000 || files == 0 {
				t.Errorf("%s took %d files with a 300-inode bound:\n%v", d, files, r)
			}
		}
	}
}

// TestDiskBoundHostDirs: the workspace and HOME are host directories; the
// sandbox that writes past the bound there (bytes, or many small files)
// is killed and says why.
func TestDiskBoundHostDirs(t *testing.T) {
	b := requireNative(t)
	for _, tc := range []struct{ name, script string }{
		{"workspace bytes", `for i in 1 2 3 4 5 6; do head -c 3000000 /dev/zero > /workspace/f$i; done; sleep 10`},
		{"home bytes", `for i in 1 2 3 4 5 6; do head -c 3000000 /dev/zero > $HOME/f$i; done; sleep 10`},
		{"workspace files", `mkdir /workspace/m; i=0; while [ $i -lt 3000 ]; do : > /workspace/m/$i; i=$((i+1)); done; sleep 10`},
		// The agent's own directories, made unreadable to hide them
		// from the walk (unprivileged: the walk is the same user's).
		{"hidden by chmod 000", `mkdir -p /workspace/h/d; for i in 1 2 3 4 5 6; do head -c 3000000 /dev/zero > /workspace/h/d/f$i; done; chmod 000 /workspace/h/d; chmod 100 /workspace/h; sleep 10`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := newSpec(t)
			spec.Limits.DiskBytes = 8 << 20
			spec.Limits.DiskInodes = 1000
			// The directories the agent made unreadable (an unprivileged
			// TempDir cleanup could not remove them).
			t.Cleanup(func() { workspace.RemoveTree(spec.Workspace) })
			sb := start(t, b, spec)
			if v := sb.Enforced()["disk"]; !strings.HasPrefix(v, "sampled") {
				t.Errorf("Enforced[disk] = %q", v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			t0 := time.Now()
			res, err := sb.Runner().Exec(ctx, runner.ExecRequest{Shell: tc.script}, nil, nil)
			if err == nil && ctx.Err() != nil {
				err = ctx.Err()
			}
			lerr := sandbox.Exceeded(sb)
			if !errors.Is(lerr, sandbox.ErrDiskExceeded) {
				t.Fatalf("not stopped after %v: exec %+v, %v; LimitExceeded = %v", time.Since(t0), res, err, lerr)
			}
			if err == nil {
				t.Errorf("exec ended normally (%+v) although the sandbox was killed", res)
			}
			t.Logf("stopped after %v: %v", time.Since(t0).Round(time.Millisecond), lerr)
		})
	}
}

// TestMemoryBoundInForce: a process inside that allocates past the memory
// bound is stopped, as root (cgroup) and unprivileged (delegated cgroup
// v2, else RLIMIT_DATA).
func TestMemoryBoundInForce(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	spec.Limits.MemoryBytes = 128 << 20
	r := sh(t, b, spec, `head -c 400000000 /dev/zero | tail -c 300000000 > /dev/null; echo tail=$?`)
	v := r.enforced["memory"]
	if !strings.HasPrefix(v, "enforced") {
		t.Fatalf("no memory bound (uid %d): Enforced[memory] = %q", os.Getuid(), v)
	}
	if strings.Contains(r.stdout, "tail=0") || !strings.Contains(r.stdout, "tail=") {
		t.Fatalf("a 300 MB buffer fit in a 128 MiB sandbox (%s):\n%v", v, r)
	}
	t.Logf("%s: %s", v, strings.TrimSpace(r.stdout))
}

// TestLimitWarningsMatchEnforced: what LimitWarnings says before a run is
// what a sandbox then reports as not (fully) in force.
func TestLimitWarningsMatchEnforced(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	warn := strings.Join(b.LimitWarnings(context.Background(), spec.Limits), "\n")
	r := sh(t, b, spec, "true")
	for _, k := range []string{"memory", "pids", "cpu", "disk", "disk_tmpfs"} {
		v := r.enforced[k]
		weak := !strings.HasPrefix(v, "enforced") && !strings.HasPrefix(v, "sampled")
		if k == "memory" && strings.Contains(v, "per process") {
			weak = true
		}
		if weak != strings.Contains(warn, k+":") {
			t.Errorf("%s: Enforced %q, warnings:\n%s", k, v, warn)
		}
	}
	t.Logf("warnings: %q", warn)
}

// TestCgroupsSweptAfterKill: a supervisor killed with SIGKILL leaves its
// sandbox's (empty) cgroups; the next sandbox started removes them.
func TestCgroupsSweptAfterKill(t *testing.T) {
	b := requireNative(t)
	spec := newSpec(t)
	spec.RunID = "sweep-test"
	h := execHelper(t, spec)
	line, _ := bufio.NewReader(h.stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("helper: %q", line)
	}
	pid, _ := initOf(t, h.cmd.Process.Pid)
	dirs := cgroupDirsOf(t, pid)
	if len(dirs) == 0 {
		t.Skipf("no cgroup was made for the sandbox here (uid %d): nothing can leak", os.Getuid())
	}
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.cmd.Wait()
	for i := 0; i < 500 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Logf("%s is gone before this test's sweep (another start swept it): %v", d, err)
		}
	}
	time.Sleep(time.Second) // a cgroup younger than that may be about to be joined: never swept
	sh(t, b, newSpec(t), "true")
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale cgroup %s left after the next start: %v", d, err)
		}
	}
}

// cgroupDirsOf lists the host directories of the agentrun cgroups pid is in.
func cgroupDirsOf(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.Contains(f[2], "agentrun-") {
			continue
		}
		for _, sub := range []string{strings.TrimPrefix(f[1], "name="), "unified"} {
			if f[1] != "" && sub == "unified" {
				break
			}
			d := filepath.Join("/sys/fs/cgroup", sub, f[2])
			if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
				dirs = append(dirs, d)
				break
			}
		}
	}
	return dirs
}
