package docker

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrun/agentrun/internal/catalog"
)

func TestRootlessEngine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	host := "unix://" + sock
	if got, want := rootlessEngine(host, nil), os.Getuid() != 0; got != want {
		t.Errorf("a socket of uid %d: rootless %v", os.Getuid(), got)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(sock, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if !rootlessEngine(host, nil) {
			t.Error("a socket of another user than root is not a rootless engine")
		}
	}
	for _, c := range []struct {
		host string
		opts []string
		want bool
	}{
		{"unix:///nonexistent/engine.sock", nil, false},
		{"tcp://127.0.0.1:2375", []string{"name=seccomp,profile=default"}, false},
		{"tcp://127.0.0.1:2375", []string{"name=seccomp,profile=default", "name=rootless"}, true},
		{"unix:///nonexistent/engine.sock", []string{"name=rootless,x=y"}, true},
	} {
		if got := rootlessEngine(c.host, c.opts); got != c.want {
			t.Errorf("rootlessEngine(%s, %v) = %v", c.host, c.opts, got)
		}
	}
}

func TestLimitsRefusal(t *testing.T) {
	for _, c := range []struct {
		rootless bool
		cgroup   string
		refused  bool
	}{
		{false, "1", false}, {false, "2", false}, {true, "2", false}, {true, "", false}, {true, "1", true},
	} {
		err := limitsRefusal("unix:///x.sock", c.rootless, c.cgroup)
		if c.refused != catalog.SandboxPreflight.Is(err) || !c.refused && err != nil {
			t.Errorf("rootless %v, cgroup v%s: %v", c.rootless, c.cgroup, err)
		}
	}
}
