package docker_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox/docker"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// TestPreflightLimitsOnThisEngine: the test engine passes preflight
// unless it cannot apply the limits, and then preflight refuses it with a
// catalog error: a rootless engine (its socket is not root's) on a machine
// without the unified cgroup v2 hierarchy starts containers without their
// memory, pids and CPU bounds. Which one holds is read here independently
// of the backend.
func TestPreflightLimitsOnThisEngine(t *testing.T) {
	host := os.Getenv(hostEnv)
	testsupport.Require(t, "a container engine", host != "", "%s is unset (eval \"$(bash .ci/install-podman.sh)\" sets it)", hostEnv)
	u, err := url.Parse(host)
	if err != nil || u.Scheme != "unix" {
		t.Skipf("%s is not a local unix socket", host)
	}
	fi, err := os.Stat(u.Path)
	if err != nil {
		t.Fatal(err)
	}
	rootless := fi.Sys().(*syscall.Stat_t).Uid != 0
	var fs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &fs); err != nil {
		t.Fatal(err)
	}
	v2 := fs.Type == unix.CGROUP2_SUPER_MAGIC
	b := docker.New(docker.Options{Host: host, Executable: testsupport.Agentrun(t)})
	err = b.Preflight(context.Background())
	t.Logf("rootless %v, cgroup v2 %v: %v", rootless, v2, err)
	if rootless && !v2 {
		if !catalog.SandboxPreflight.Is(err) || !strings.Contains(err.Error(), "cgroup v1") {
			t.Fatalf("a rootless engine on cgroup v1 passed preflight: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("preflight: %v", err)
	}
}
