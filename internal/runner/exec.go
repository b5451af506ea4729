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

	"github.com/agentrun/agentrun/internal/runner/deathwatch"
)

const defaultPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// exec runs one command in its own process group and streams its output
// into e. Whatever happens, the group is gone when it returns.
func (s *server) exec(ctx context.Context, e *execution, req *ExecRequest) (*ExecResult, error) {
	cmd, err := s.command(req)
	if err != nil {
		return nil, err
	}
	limit, grace := req.bounds()
	if !s.opts.NoWatchdog {
		if err := s.watchdog.ready(); err != nil {
			return nil, &OpError{Code: CodeExec, Message: err.Error() + " (a command must not outlive a runner that dies)"}
		}
	}
	p, err := openExecPipes(len(req.Stdin) > 0)
	if err != nil {
		return nil, err
	}
	// A runner not contained by a pid namespace that dies with it (the
	// host backend: it runs the watchdog) also tracks descendants that
	// leave the group.
	var mk *marker
	var expected deathwatch.Watched
	if !s.opts.NoWatchdog {
		mk = newMarker()
		// Known before the start: a runner killed before add still has
		// the command ended (add reports a failure to start a watchdog).
		expected = mk.expected()
		_ = s.watchdog.expect(expected)
	}
	start := time.Now()
	if err := startCommand(cmd, p, mk, s.opts.StartCmd); err != nil {
		s.watchdog.settle(expected.Link)
		return nil, err
	}
	pgid := cmd.Process.Pid
	var wdErr error
	if !s.opts.NoWatchdog {
		if wdErr = s.watchdog.add(pgid, mk.watched(pgid), expected.Link); wdErr != nil {
			// Nothing would end the group if the runner died: end it now.
			syscall.Kill(-pgid, syscall.SIGKILL)
		} else {
			defer s.watchdog.remove(pgid)
		}
	}
	p.feedStdin(req.Stdin)
	out := p.read(e, limit)

	res := &ExecResult{}
	werr := waitOrKill(ctx, cmd, req.Timeout, grace, res)
	mk.waited(pgid)
	// The main process is gone; background children of its group must
	// not outlive the call (nor keep our pipes open), nor may descendants
	// that left the group (setsid, double fork).
	reapGroup(pgid, grace)
	mk.killStrays(pgid, grace+time.Second)
	p.drain(out)
	res.Truncated = out.truncated
	for i := range 2 {
		if e.endCapture(i) {
			res.Truncated = true
		}
	}
	if p.inW != nil {
		p.inW.Close() // unblocks a stdin writer whose reader was never drained
	}
	if wdErr != nil {
		return nil, &OpError{Code: CodeExec, Message: wdErr.Error() + " (a command must not outlive a runner that dies)"}
	}
	res.Duration = time.Since(start)
	res.Stdout = out.tails[0].bytes()
	res.Stderr = out.tails[1].bytes()
	return exitStatus(res, cmd, werr)
}

// command checks req and resolves what it runs: the argv (a shell line
// runs under /bin/sh -c), the directory (relative ones under the root),
// the environment and the program, found on that environment's PATH.
func (s *server) command(req *ExecRequest) (*exec.Cmd, error) {
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
	return &exec.Cmd{Path: path, Args: argv, Env: env, Dir: dir, SysProcAttr: sysProcAttr()}, nil
}

// execPipes are a command's stdout and stderr pipes, and its stdin pipe
// when the request has input. The W ends of stdout and stderr and the R
// end of stdin are the child's.
type execPipes struct {
	outR, outW *os.File
	errR, errW *os.File
	inR, inW   *os.File // nil without stdin
}

func openExecPipes(stdin bool) (*execPipes, error) {
	p := &execPipes{}
	var err error
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.outR.Close()
		p.outW.Close()
		return nil, err
	}
	if stdin {
		if p.inR, p.inW, err = os.Pipe(); err != nil {
			p.outR.Close()
			p.outW.Close()
			p.errR.Close()
			p.errW.Close()
			return nil, err
		}
	}
	return p, nil
}

// startCommand starts cmd on the pipes' child ends, with mk's files,
// through start (nil: startCmd), and then closes those ends here (the
// child has its own). If the start fails, every pipe and the marker are
// closed as well.
func startCommand(cmd *exec.Cmd, p *execPipes, mk *marker, start func(*exec.Cmd) error) error {
	cmd.ExtraFiles = mk.files()
	cmd.Stdout = p.outW
	cmd.Stderr = p.errW
	if p.inR != nil {
		cmd.Stdin = p.inR
	}
	if start == nil {
		start = startCmd
	}
	release := holdForks() // (see forkMu)
	err := start(cmd)
	if err == nil {
		mk.started(cmd.Process.Pid)
	}
	release()
	p.outW.Close()
	p.errW.Close()
	if p.inR != nil {
		p.inR.Close()
	}
	if err != nil {
		mk.killStrays(0, 0) // closes the marker
		p.outR.Close()
		p.errR.Close()
		if p.inW != nil {
			p.inW.Close()
		}
		return &OpError{Code: CodeExec, Message: err.Error()}
	}
	return nil
}

// feedStdin writes data to the command's stdin and closes it, from a
// goroutine: a command that does not read its input must not hold up the
// call.
func (p *execPipes) feedStdin(data []byte) {
	if p.inW == nil {
		return
	}
	go func() {
		p.inW.Write(data)
		p.inW.Close()
	}()
}

// execOutput is what the readers of a command's stdout and stderr keep.
type execOutput struct {
	readers   sync.WaitGroup
	tails     [2]tail // the last bytes of each stream, for the result
	mu        sync.Mutex
	truncated bool // the capture cut a stream at its limit
}

// read starts one reader per stream, each feeding e's capture (cut at
// limit) and the stream's tail until its pipe ends.
func (p *execPipes) read(e *execution, limit int64) *execOutput {
	o := &execOutput{}
	for i, r := range []*os.File{p.outR, p.errR} {
		o.readers.Add(1)
		go func() {
			defer o.readers.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 {
					o.tails[i].write(buf[:n])
					if e.capture(i, buf[:n], limit) {
						o.mu.Lock()
						o.truncated = true
						o.mu.Unlock()
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return o
}

// drain waits for o's readers to reach the end of their pipes, then
// closes the read ends. It runs once the command's group and strays are
// gone, so a pipe that has not ended is either still holding output its
// reader has yet to take (a reader slow to be scheduled on a loaded
// machine) or held open by something outside the group. The first is
// waited for, while the pipe holds data and up to drainMax, so no output
// the command wrote is lost; the second is let go after drainIdle with
// nothing buffered: what such a process writes later is not captured.
func (p *execPipes) drain(o *execOutput) {
	drained := make(chan struct{})
	go func() { o.readers.Wait(); close(drained) }()
	deadline := time.Now().Add(drainMax)
	wait := drainIdle
	for {
		t := time.NewTimer(wait)
		select {
		case <-drained:
			t.Stop()
			p.outR.Close()
			p.errR.Close()
			return
		case <-t.C:
		}
		if (pipeHoldsData(p.outR) || pipeHoldsData(p.errR)) && time.Now().Before(deadline) {
			wait = drainRecheck
			continue
		}
		// Nothing buffered (or drainMax spent): stop reading.
		p.outR.Close()
		p.errR.Close()
		<-drained
		return
	}
}

// drainIdle is how long drain waits for the pipes to end before it looks
// whether they hold data; drainRecheck how often it looks again while
// they do; drainMax the longest it waits for a reader to take the data.
const (
	drainIdle    = 250 * time.Millisecond
	drainRecheck = 20 * time.Millisecond
	drainMax     = 10 * time.Second
)

// pipeHoldsData reports whether the read end r of a pipe has bytes no one
// has read yet (FIONREAD); false when it cannot tell.
func pipeHoldsData(r *os.File) bool {
	rc, err := r.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if err := rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), fionread) }); err != nil {
		return false
	}
	return n > 0
}

// waitOrKill waits for the command's main process; on timeout (when
// timeout > 0) or when ctx ends, it ends the group (see killGroup) and
// says so in res. It returns the main process's wait error.
func waitOrKill(ctx context.Context, cmd *exec.Cmd, timeout, grace time.Duration, res *ExecResult) error {
	pgid := cmd.Process.Pid
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case err := <-waitc:
		return err
	case <-expired:
		res.TimedOut = true
		return killGroup(pgid, grace, waitc)
	case <-ctx.Done():
		res.Cancelled = true
		return killGroup(pgid, grace, waitc)
	}
}

// exitStatus fills in how the main process ended. A wait error other
// than an exit status is the runner's own failure.
func exitStatus(res *ExecResult, cmd *exec.Cmd, werr error) (*ExecResult, error) {
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
