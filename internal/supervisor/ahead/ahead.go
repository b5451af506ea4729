// Package ahead starts a Lite submit's supervisor process from a package
// initializer, before the rest of the binary's packages are initialized.
//
// A process of the agentrun binary spends most of its start (60-70 ms on
// a slow machine, against 12 for a Go hello world) in the package
// initializers of its libraries. A submit starts its run's supervisor
// ahead of the run (supervisor.Prespawn), and that process starts the
// sandbox's init ahead too: the three starts are in one chain, so each
// start's initializers are on the path from the submit to its agent.
// This package's initializer runs right after package os's (it imports
// nothing that comes later in the binary's order) and, when the command
// line is a Lite submit, starts the supervisor there and then, so that
// its start overlaps the submit's own instead of following it.
//
// What it starts knows nothing yet: it waits on its socket first for the
// sandbox backend to start ahead (a line the submit writes once its
// configuration is read, Started.Tell), then for its run. A submit that
// makes no run (bad input, another data directory) closes the socket, and
// the supervisor exits having touched nothing.
//
// Only os, path, runtime, syscall and package warmstart (which imports no
// more) are imported here, so that the initializer keeps its early place;
// a test checks that place.
package ahead

import (
	"errors"
	"os"
	"path"
	"runtime"
	"syscall"

	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
)

// Started is a pending supervisor process and our end of its socket.
type Started struct {
	Home string // the data directory it was started for
	Exe  string // the binary it runs
	Proc *os.Process
	// Conn is our end of the socket (non-blocking, close-on-exec): the
	// backend line and then the run go over it, and the supervisor sends
	// a byte at each change of the run's state.
	Conn *os.File
}

// early is the supervisor the initializer started, until Take.
var early *Started

func init() {
	if exe, err := os.Executable(); err == nil {
		Early(os.Args, os.Getenv, exe)
	}
}

// Early is what the initializer does with the process's command line:
// when args are a Lite submit (Wanted), it starts binary exe's supervisor
// for the data directory, for Take, and returns it. Errors start nothing:
// the submit starts its supervisor later, as without this package.
func Early(args []string, getenv func(string) string, exe string) *Started {
	if !Wanted(args, getenv) {
		return nil
	}
	s, err := Spawn(DataHome(getenv), exe, WarmNative(likelyBackend(args, getenv)))
	if err != nil {
		return nil
	}
	early = s
	return s
}

// Take returns the supervisor the initializer started, once; nil when it
// started none or it was taken already.
func Take() *Started {
	s := early
	early = nil
	return s
}

// Wanted says whether a process with command line args (os.Args) is a
// submit to this machine's runs, so that starting its supervisor early
// is likely used. It errs on the side of not starting: a run to a team
// server (--server, AGENTRUN_SERVER) has no local supervisor, and help
// makes no run.
func Wanted(args []string, getenv func(string) string) bool {
	if len(args) < 2 || args[1] != "submit" || getenv("AGENTRUN_SERVER") != "" {
		return false
	}
	for _, a := range args[2:] {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || hasFlag(a, "--server") || hasFlag(a, "--token-file") {
			return false
		}
	}
	return path.IsAbs(DataHome(getenv))
}

// likelyBackend is the sandbox backend a submit with command line args
// names (--sandbox, else $AGENTRUN_SANDBOX); "" where it names none (the
// configuration's or the platform's default).
func likelyBackend(args []string, getenv func(string) string) string {
	b := getenv("AGENTRUN_SANDBOX")
	for i, a := range args[2:] {
		if a == "--" {
			break
		}
		switch {
		case a == "--sandbox" && i+3 < len(args):
			b = args[i+3]
		case hasFlag(a, "--sandbox") && len(a) > len("--sandbox="):
			b = a[len("--sandbox="):]
		}
	}
	return b
}

// WarmNative says whether a supervisor whose run will likely use backend
// ("": the default) starts the native sandbox's init from its initializer
// (package warmstart): on Linux, where native is the default, unless
// another is named. A guess that the run then does not bear out costs a
// process start, which the supervisor ends once it is told the backend.
func WarmNative(backend string) bool {
	return runtime.GOOS == "linux" && (backend == "" || backend == warmstart.Backend)
}

// hasFlag says whether a is flag f, alone or as f=value.
func hasFlag(a, f string) bool {
	return a == f || (len(a) > len(f) && a[:len(f)] == f && a[len(f)] == '=')
}

// DataHome is the data directory: $AGENTRUN_HOME, else
// $XDG_DATA_HOME/agentrun, else ~/.local/share/agentrun. (path, not
// path/filepath: the same on unix, and it waits for fewer packages.)
func DataHome(getenv func(string) string) string {
	if h := getenv("AGENTRUN_HOME"); h != "" {
		return h
	}
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return path.Join(x, "agentrun")
	}
	return path.Join(getenv("HOME"), ".local", "share", "agentrun")
}

// Environ is a supervisor's environment, taken from the caller's: enough
// to find programs and the user's git identity, nothing secret. Secrets
// the run needs come through its handoff.
func Environ() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR",
		"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "GOCOVERDIR"} {
		if v, ok := syscall.Getenv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Spawn starts `exe __supervise --home home --pending` in a new session,
// its socket as fd 3 and /dev/null as its stdin, stdout and stderr, and
// reaps it when it exits; with warmNative, its initializer starts the
// native sandbox's init too (warmstart.Flag). The caller tells it its
// backend (Tell), then hands it its run, or closes Conn.
func Spawn(home, exe string, warmNative bool) (*Started, error) {
	fds, err := socketPair()
	if err != nil {
		return nil, err
	}
	// Our end is non-blocking, so that its reads go through the runtime's
	// poller and end when it is closed; the child's end is another
	// socket, which stays blocking.
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "supervisor handoff"), os.NewFile(uintptr(fds[1]), "handoff")
	defer theirs.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		ours.Close()
		return nil, err
	}
	defer null.Close()
	p, err := os.StartProcess(exe, supervisorArgs(exe, home, warmNative), &os.ProcAttr{
		Dir:   "/",
		Env:   Environ(),
		Files: []*os.File{null, null, null, theirs},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		ours.Close()
		return nil, err
	}
	go p.Wait() // reap it if this process outlives it
	return &Started{Home: home, Exe: exe, Proc: p, Conn: ours}, nil
}

// supervisorArgs is the command line of a supervisor started ahead.
func supervisorArgs(exe, home string, warmNative bool) []string {
	args := []string{exe, "__supervise", "--home", home, "--pending"}
	if warmNative {
		args = append(args, warmstart.Flag)
	}
	return args
}

// socketPair is a close-on-exec pair of connected stream sockets, made
// under the fork lock (as os.Pipe does where there is no pipe2) so that no
// process started meanwhile inherits them: SOCK_CLOEXEC is Linux's alone.
func socketPair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	return fds, err
}

// MaxBackend bounds the backend line.
const MaxBackend = 64

// ErrNoBackend means the socket closed before the backend line came: the
// submit made no run.
var ErrNoBackend = errors.New("no run came")

// Tell sends the supervisor the sandbox backend it should start ahead
// ("" = none), the first thing it waits for.
func (s *Started) Tell(backend string) error {
	if len(backend) >= MaxBackend {
		backend = "" // not a backend's name: start nothing ahead
	}
	_, err := s.Conn.Write([]byte(backend + "\n"))
	return err
}

// ReadBackend is the supervisor's side of Tell: it reads the line from fd
// (its blocking end of the socket) a byte at a time, so that nothing of
// the run after it (which carries descriptors) is taken with it.
func ReadBackend(fd int) (string, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) < MaxBackend {
		n, err := syscall.Read(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		if n == 0 {
			return "", ErrNoBackend
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("backend line too long")
}
