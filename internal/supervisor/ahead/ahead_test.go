package ahead

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestWanted(t *testing.T) {
	home := env("HOME", "/home/u")
	for _, c := range []struct {
		args   string
		getenv func(string) string
		want   bool
	}{
		{"agentrun submit fix it", home, true},
		{"agentrun submit --sandbox native --wait fix", home, true},
		{"agentrun submit -- --server", home, true}, // a task, not the flag
		{"agentrun", home, false},
		{"agentrun list", home, false},
		{"agentrun __supervise --home /x --pending", home, false},
		{"agentrun --json submit x", home, false}, // not looked for
		{"agentrun submit --server http://h x", home, false},
		{"agentrun submit --server=http://h x", home, false},
		{"agentrun submit --token-file t x", home, false},
		{"agentrun submit --help", home, false},
		{"agentrun submit -h", home, false},
		{"agentrun submit x", env("HOME", "/home/u", "AGENTRUN_SERVER", "http://h"), false},
		{"agentrun submit x", env("AGENTRUN_HOME", "rel/dir"), false},
		{"agentrun submit x", env(), false}, // no HOME: a relative data directory
		{"agentrun submit --serverless x", home, true},
	} {
		if got := Wanted(strings.Fields(c.args), c.getenv); got != c.want {
			t.Errorf("Wanted(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestDataHome(t *testing.T) {
	for _, c := range []struct {
		getenv func(string) string
		want   string
	}{
		{env("AGENTRUN_HOME", "/data/ar/", "XDG_DATA_HOME", "/x", "HOME", "/h"), "/data/ar/"},
		{env("XDG_DATA_HOME", "/x//share/", "HOME", "/h"), "/x/share/agentrun"},
		{env("HOME", "/home/u/"), "/home/u/.local/share/agentrun"},
		{env(), ".local/share/agentrun"},
	} {
		if got := DataHome(c.getenv); got != c.want {
			t.Errorf("DataHome = %q, want %q", got, c.want)
		}
	}
}

// TestBackendLineLeavesTheRunsDescriptors: the backend line is read a byte
// at a time, so the message after it, with descriptors, arrives whole.
func TestBackendLineLeavesTheRunsDescriptors(t *testing.T) {
	fds, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	ours := &Started{Conn: os.NewFile(uintptr(fds[0]), "ours")}
	defer ours.Conn.Close()
	defer syscall.Close(fds[1])
	if err := ours.Tell("native"); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := syscall.Sendmsg(fds[0], []byte("run"), syscall.UnixRights(int(w.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadBackend(fds[1]); err != nil || b != "native" {
		t.Fatalf("ReadBackend = %q, %v; want native", b, err)
	}
	buf, oob := make([]byte, 16), make([]byte, syscall.CmsgSpace(4))
	n, oobn, _, _, err := syscall.Recvmsg(fds[1], buf, oob, 0)
	if err != nil || string(buf[:n]) != "run" {
		t.Fatalf("the run: %q, %v", buf[:n], err)
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("the run came without its descriptor: %d messages, %v", len(msgs), err)
	}
	got, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(got) != 1 {
		t.Fatalf("descriptors %v, %v", got, err)
	}
	syscall.Close(got[0])
}

func TestReadBackendEnds(t *testing.T) {
	fds, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[1])
	// The submit made no run: its end closes before the line.
	syscall.Write(fds[0], []byte("nat"))
	syscall.Close(fds[0])
	if _, err := ReadBackend(fds[1]); !errors.Is(err, ErrNoBackend) {
		t.Fatalf("ReadBackend of a closed socket: %v, want ErrNoBackend", err)
	}
	// A line that is no backend's name is refused, not read on and on.
	fds, err = socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	syscall.Write(fds[0], []byte(strings.Repeat("x", MaxBackend+10)+"\n"))
	if b, err := ReadBackend(fds[1]); err == nil {
		t.Fatalf("ReadBackend of a long line = %q", b)
	}
}

func TestWarmNativeGuess(t *testing.T) {
	onLinux := runtime.GOOS == "linux"
	for _, c := range []struct {
		args   string
		getenv func(string) string
		want   bool
	}{
		{"agentrun submit fix it", env(), onLinux}, // the default
		{"agentrun submit --sandbox native fix", env(), onLinux},
		{"agentrun submit --sandbox=native fix", env(), onLinux},
		{"agentrun submit --sandbox docker fix", env(), false},
		{"agentrun submit --sandbox=host fix", env(), false},
		{"agentrun submit fix", env("AGENTRUN_SANDBOX", "docker"), false},
		{"agentrun submit --sandbox native fix", env("AGENTRUN_SANDBOX", "docker"), onLinux}, // the flag wins
		{"agentrun submit -- --sandbox docker", env(), onLinux},                              // a task, not the flag
		{"agentrun submit --sandbox", env(), onLinux},                                        // no value: the submit refuses it
	} {
		if got := WarmNative(likelyBackend(strings.Fields(c.args), c.getenv)); got != c.want {
			t.Errorf("WarmNative for %q = %v, want %v", c.args, got, c.want)
		}
	}
}

// TestSupervisorArgsAskForTheInit: the command line Spawn gives a
// supervisor asks its initializer (warmstart.Wanted) to start the native
// sandbox's init exactly when warmNative says so.
func TestSupervisorArgsAskForTheInit(t *testing.T) {
	for _, warm := range []bool{false, true} {
		args := supervisorArgs("/usr/bin/agentrun", "/home/u/.local/share/agentrun", warm)
		if got := warmstart.Wanted(args); got != warm {
			t.Errorf("warmNative %v: the initializer of %q starts the init: %v", warm, args, got)
		}
	}
}
