package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const defaultPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// exec runs one command in its own process group and streams its output
// into e. Whatever happens, the group is gone when it returns.
func (s *server) exec(ctx context.Context, e *execution, req *ExecRequest) (*ExecResult, error) {
	if (len(req.Argv) == 0) == (req.Shell == "") {
		return nil, &OpError{Code: CodeBadRequest, Message: "exec needs exactly one of argv and shell"}
	}
	argv := req.Argv
	if req.Shell != "" {
		argv = []string{"/bin/sh", "-c", req.Shell}
	}
	dir := s.opts.Root
	if req.Cwd != "" {
		dir = req.Cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.opts.Root, dir)
		}
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, &OpError{Code: CodeNotFound, Message: "cwd " + req.Cwd + " does not exist"}
	} else if !fi.IsDir() {
		return nil, &OpError{Code: CodeNotDir, Message: "cwd " + req.Cwd + " is not a directory"}
	}
	env := append(append([]string(nil), s.opts.Env...), req.Env...)
	path, err := lookPath(argv[0], env, dir)
	if err != nil {
		return nil, &OpError{Code: CodeExec, Message: err.Error()}
	}
	limit, grace := req.bounds()
	if !s.opts.NoWatchdog {
		if err := s.watchdog.ready(); err != nil {
			return nil, &OpError{Code: CodeExec, Message: err.Error() + " (a command must not outlive a runner that dies)"}
		}
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	var inR, inW *os.File
	if len(req.Stdin) > 0 {
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, err
		}
	}
	// A runner not contained by a pid namespace that dies with it (the
	// host backend: it runs the watchdog) also tracks descendants that
	// leave the group.
	var mk *marker
	if !s.opts.NoWatchdog {
		mk = newMarker()
	}
	cmd := &exec.Cmd{
		ExtraFiles:  mk.files(),
		Path:        path,
		Args:        argv,
		Env:         env,
		Dir:         dir,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: sysProcAttr(),
	}
	if inR != nil {
		cmd.Stdin = inR
	}
	start := time.Now()
	err = startCmd(cmd)
	if err == nil {
		mk.started(cmd.Process.Pid)
	}
	outW.Close()
	errW.Close()
	if inR != nil {
		inR.Close()
	}
	if err != nil {
		mk.killStrays(0, 0) // closes the marker
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return nil, &OpError{Code: CodeExec, Message: err.Error()}
	}
	pgid := cmd.Process.Pid
	var wdErr error
	if !s.opts.NoWatchdog {
		if wdErr = s.watchdog.add(pgid, mk.watched(pgid)); wdErr != nil {
			// Nothing would end the group if the runner died: end it now.
			syscall.Kill(-pgid, syscall.SIGKILL)
		} else {
			defer s.watchdog.remove(pgid)
		}
	}
	if inW != nil {
		go func() {
			inW.Write(req.Stdin)
			inW.Close()
		}()
	}

	res := &ExecResult{}
	var tails [2]tail
	var readers sync.WaitGroup
	var truncMu sync.Mutex
	for i, r := range []*os.File{outR, errR} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					tails[i].write(buf[:n])
					if e.capture(i, buf[:n], limit) {
						truncMu.Lock()
						res.Truncated = true
						truncMu.Unlock()
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}

	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var werr error
	select {
	case werr = <-waitc:
	case <-timeout:
		res.TimedOut = true
		werr = killGroup(pgid, grace, waitc)
	case <-ctx.Done():
		res.Cancelled = true
		werr = killGroup(pgid, grace, waitc)
	}
	mk.waited(pgid)
	// The main process is gone; background children of its group must
	// not outlive the call (nor keep our pipes open), nor may descendants
	// that left the group (setsid, double fork).
	reapGroup(pgid, grace)
	mk.killStrays(pgid, grace+time.Second)
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(250 * time.Millisecond):
		// Something outside the group holds the pipes: stop reading.
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()
	for i := range 2 {
		if e.endCapture(i) {
			res.Truncated = true
		}
	}
	if inW != nil {
		inW.Close() // unblocks a stdin writer whose reader was never drained
	}
	if wdErr != nil {
		return nil, &OpError{Code: CodeExec, Message: wdErr.Error() + " (a command must not outlive a runner that dies)"}
	}
	res.Duration = time.Since(start)
	res.Stdout = tails[0].bytes()
	res.Stderr = tails[1].bytes()
	res.ExitCode = 0
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return nil, werr
		}
	}
	if ps := cmd.ProcessState; ps != nil {
		res.ExitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = -1
			res.Signal = unix.SignalName(ws.Signal())
		}
	}
	return res, nil
}

// killGroup ends the group of a main process that has not exited: SIGTERM,
// then SIGKILL after grace. It returns the main process's wait error.
func killGroup(pgid int, grace time.Duration, waitc <-chan error) error {
	syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-waitc:
		return err
	case <-t.C:
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	return <-waitc
}

// reapGroup kills what is left of a group whose leader has exited:
// SIGTERM, wait up to grace for the group to empty, then SIGKILL.
func reapGroup(pgid int, grace time.Duration) {
	if !groupAlive(pgid) {
		return
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	if waitGroupGone(pgid, grace) {
		return
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	waitGroupGone(pgid, time.Second)
}

func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	sleep := time.Millisecond
	for time.Now().Before(deadline) {
		if !groupAlive(pgid) {
			return true
		}
		time.Sleep(sleep)
		sleep = min(sleep*2, 20*time.Millisecond)
	}
	return !groupAlive(pgid)
}

// lookPath finds argv0 on the PATH of the command's environment (not the
// runner's own).
func lookPath(argv0 string, env []string, dir string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		return p, nil
	}
	pathEnv := defaultPath
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			pathEnv = v
			break
		}
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, argv0)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", errors.New(argv0 + ": executable file not found in $PATH")
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return errors.New(p + ": not an executable file")
	}
	return nil
}

// tail keeps the last tailSize bytes written.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= tailSize {
		t.buf = append(t.buf[:0], p[len(p)-tailSize:]...)
		return
	}
	if over := len(t.buf) + len(p) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
}

func (t *tail) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) == 0 {
		return nil
	}
	return append([]byte(nil), t.buf...)
}
