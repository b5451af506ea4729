package native

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/diskwatch"
	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Defaults for zero limits.
const (
	defaultPids      = 4096
	defaultFileSize  = 16 << 30
	defaultOpenFiles = 8192
	stopGrace        = 3 * time.Second
	readyTimeout     = 30 * time.Second
)

// child is a started init: its process, closed done once it was waited
// for, and then how it ended.
type child struct {
	process *os.Process
	done    chan struct{}
	state   *os.ProcessState
}

// waitFor is p, waited for by wait from now on.
func waitFor(p *os.Process, wait func() *os.ProcessState) *child {
	c := &child{process: p, done: make(chan struct{})}
	go func() {
		c.state = wait()
		close(c.done)
	}()
	return c
}

// proc is one started init (pid 1 of a sandbox).
type proc struct {
	*child
	// stopped is closed when a serving init says that nothing but
	// itself runs any more; it then waits to be killed (see quiesce).
	stopped  chan struct{}
	cg       *cgroups
	enforced map[string]string
	disk     *diskwatch.Watch // nil in probe mode
	marks    marks            // when the steps of its start ended
}

func (p *proc) wait() { <-p.done }

// kill ends the whole sandbox: SIGKILL to pid 1 kills its pid namespace,
// and the kernel reaps every process in it before pid 1's wait returns.
func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		p.process.Kill()
	}
	<-p.done
}

func (b *Backend) executable() (string, error) {
	exe := b.opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", fmt.Errorf("find the agentrun executable: %w", err)
		}
	}
	exe, err := filepath.Abs(exe)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return "", fmt.Errorf("agentrun executable: %w", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("agentrun executable %s is not an executable file", exe)
	}
	return exe, nil
}

func (b *Backend) makeConfig(spec sandbox.Spec, mode string) (*config, cgLimits, error) {
	var lim cgLimits
	exe, err := b.executable()
	if err != nil {
		return nil, lim, err
	}
	for _, p := range []struct{ name, path string }{{"workspace", spec.Workspace}, {"state dir", spec.StateDir}} {
		if p.path == "" || !filepath.IsAbs(p.path) {
			return nil, lim, fmt.Errorf("the %s must be an absolute path, got %q", p.name, p.path)
		}
	}
	if fi, err := os.Stat(spec.Workspace); err != nil || !fi.IsDir() {
		return nil, lim, fmt.Errorf("workspace %s is not a directory", spec.Workspace)
	}
	c := &config{
		Mode:       mode,
		UID:        os.Getuid(),
		GID:        os.Getgid(),
		Root:       filepath.Join(spec.StateDir, "root"),
		Workspace:  spec.Workspace,
		Home:       spec.Home,
		Executable: exe,
	}
	if c.Layers, err = layersConfig(spec); err != nil {
		return nil, lim, err
	}
	if spec.Home != "" {
		if fi, err := os.Stat(spec.Home); err != nil || !fi.IsDir() {
			return nil, lim, fmt.Errorf("home %s is not a directory", spec.Home)
		}
		if c.Layers != nil {
			if c.HomeLayers, err = homeLayers(spec); err != nil {
				return nil, lim, err
			}
		}
	}
	for _, p := range b.opts.ReadOnlyPaths {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := checkReadOnlyTarget(p); err != nil {
			return nil, lim, err
		}
		c.ReadOnly = append(c.ReadOnly, filepath.Clean(p))
	}
	for _, p := range spec.ReadOnlyPaths {
		if err := checkReadOnlyTarget(p); err != nil {
			return nil, lim, err
		}
		if _, err := os.Stat(p); err != nil {
			return nil, lim, fmt.Errorf("read-only path: %w", err)
		}
		c.ReadOnly = append(c.ReadOnly, filepath.Clean(p))
	}
	switch spec.Network {
	case sandbox.NetworkNone, "":
	case sandbox.NetworkAllowlist:
		if spec.ProxySocket == "" {
			return nil, lim, errors.New("network allowlist needs the egress proxy's socket")
		}
		fi, err := os.Stat(spec.ProxySocket)
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return nil, lim, fmt.Errorf("egress proxy socket %s is not a unix socket", spec.ProxySocket)
		}
		c.ProxySocket, c.Forwards, c.HostNetNS = spec.ProxySocket, spec.Forwards, netnsInode()
	default:
		return nil, lim, fmt.Errorf("network %q is not supported by the native sandbox (use none or allowlist)", spec.Network)
	}
	if spec.GatewaySocket != "" {
		fi, err := os.Stat(spec.GatewaySocket)
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return nil, lim, fmt.Errorf("model gateway socket %s is not a unix socket", spec.GatewaySocket)
		}
		c.GatewaySocket = spec.GatewaySocket
	}
	c.LoopbackTCP = spec.LoopbackTCP
	c.AllowNoLandlock = b.allowNoLandlock()
	c.Env = sandboxEnv(spec.Env, c.ProxySocket != "")
	l := spec.Limits
	c.OpenFiles = orDefault(l.OpenFiles, defaultOpenFiles)
	lim = resolveCgLimits(l)
	if c.UID != 0 {
		c.Nproc = lim.Pids
	}
	// The disk bound: no file larger than it (RLIMIT_FSIZE), each tmpfs no
	// larger than it nor than the memory bound (tmpfs pages count against
	// the memory cgroup where there is one; bounded anyway so that /tmp
	// cannot fill the host's memory), the whole sampled (diskwatch).
	c.DiskBytes, c.DiskInodes = diskLimits(l)
	c.FileSize = min(orDefault(l.FileSizeBytes, defaultFileSize), c.DiskBytes)
	c.TmpSize = c.DiskBytes
	if lim.Memory > 0 {
		c.TmpSize = min(c.TmpSize, lim.Memory)
	}
	c.TmpInodes = c.DiskInodes
	return c, lim, nil
}

// resolveCgLimits is l with the defaults for its zero cgroup limits.
func resolveCgLimits(l sandbox.Limits) cgLimits {
	lim := cgLimits{Pids: orDefault(l.Pids, defaultPids), Memory: l.MemoryBytes, CPUs: l.CPUs}
	if lim.Memory <= 0 {
		var si unix.Sysinfo_t
		if unix.Sysinfo(&si) == nil {
			lim.Memory = int64(si.Totalram) * int64(si.Unit) / 2
		}
	}
	if lim.CPUs <= 0 {
		lim.CPUs = float64(runtime.NumCPU())
	}
	return lim
}

func orDefault(v, d int64) int64 {
	if v > 0 {
		return v
	}
	return d
}

// sandboxEnv is the spec's environment with HOME, TMPDIR and PATH set for
// the inside, and the proxy variables when egress goes through the bridge.
func sandboxEnv(base []string, proxy bool) []string {
	env := make([]string, 0, len(base)+8)
	set := map[string]string{"HOME": homeDir, "TMPDIR": "/tmp"}
	if proxy {
		u := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
			set[k] = u
		}
		set["NO_PROXY"] = "localhost,127.0.0.1,::1"
		set["no_proxy"] = set["NO_PROXY"]
		for _, kv := range sandbox.JVMProxyEnv("127.0.0.1", proxyPort) {
			k, v, _ := strings.Cut(kv, "=")
			set[k] = v
		}
	}
	hasPath := false
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := set[k]; over {
			continue
		}
		hasPath = hasPath || k == "PATH"
		env = append(env, kv)
	}
	if !hasPath {
		env = append(env, "PATH="+defaultPath)
	}
	for _, k := range []string{"HOME", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
		"JAVA_TOOL_OPTIONS", "GRADLE_OPTS", "MAVEN_OPTS"} {
		if v, ok := set[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func namespacesEnforced() map[string]string {
	m := map[string]string{"namespaces": "enforced"}
	if os.Getuid() != 0 {
		m["userns"] = "enforced"
	} else {
		m["userns"] = "unavailable: started as root, the sandbox runs as root with every capability dropped"
	}
	return m
}

// launch starts an init for spec with the given stdio and extra files
// (from fd 5), waits until it is ready and returns it. On error nothing is
// left running.
func (b *Backend) launch(ctx context.Context, spec sandbox.Spec, c *config, lim cgLimits, stdin io.Reader, stdout, stderr io.Writer, extra []*os.File) (_ *proc, err error) {
	if err := os.MkdirAll(c.Root, 0o700); err != nil {
		return nil, fmt.Errorf("make sandbox root: %w", err)
	}
	if c.Mode == modeServe {
		// The runner's listener is extra's first file, the log stdout.
		if log, ok := stdout.(*os.File); ok && len(extra) == 1 {
			if w := takeWarm(c.Executable); w != nil {
				defer w.cfgW.Close()
				defer w.stR.Close()
				mk := slices.Clone(w.marks)
				mk.add("host-warm-taken")
				err := w.send(extra[0], log)
				if err == nil {
					return b.configure(ctx, spec, c, lim, w.child, w.cfgW, w.stR, w.cgroups, mk)
				}
				w.discard()
				if !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
					return nil, err
				}
				// It ended after takeWarm looked (a signal, the OOM
				// killer): start one, as without an init started ahead.
			}
		}
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer cfgR.Close()
	defer cfgW.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer stR.Close()
	defer stW.Close()

	var mk marks
	cmd := initCommand(c.Executable, c.UID, c.GID, c.Layers != nil, stdin, stdout, stderr, append([]*os.File{cfgR, stW}, extra...))
	mk.add("host-spawn")
	if err := startOnForkThread(cmd); err != nil {
		return nil, fmt.Errorf("start the sandbox init: %w", err)
	}
	mk.add("host-spawned")
	cfgR.Close()
	stW.Close()
	ch := waitFor(cmd.Process, func() *os.ProcessState {
		cmd.Wait()
		return cmd.ProcessState
	})
	return b.configure(ctx, spec, c, lim, ch, cfgW, stR, nil, mk)
}

// configure sends a started init (ch, its config channel cfgW and status
// pipe stR) its config, puts it in its
// cgroups (those it joined ahead, if joined is not nil), and waits until
// it is ready. On error nothing is left running.
func (b *Backend) configure(ctx context.Context, spec sandbox.Spec, c *config, lim cgLimits, ch *child, cfgW, stR *os.File, joined <-chan joinedCgroups, mk marks) (_ *proc, err error) {
	// The config goes at once: the init builds the root while the
	// cgroups are made, and starts nothing before goLine says it is in
	// them, with their limits.
	cfgErr := sendConfig(cfgW, c)
	cg, cgEnforced := joinCgroups(spec.RunID, ch.process.Pid, lim, joined)
	p := &proc{child: ch, cg: cg, stopped: make(chan struct{})}
	sp, spErr := newStatusPipe(stR)
	defer func() {
		if err != nil {
			p.kill()
			cg.remove()
		}
		if sp != nil && (err != nil || c.Mode != modeServe) {
			sp.f.Close()
		}
	}()
	if spErr != nil {
		return nil, spErr
	}
	mk.add("host-cgroups")
	// A failure is reported in cgEnforced; an init that died meanwhile
	// says why below.
	memoryFallback(ch.process.Pid, lim.Memory, cgEnforced)
	sendErr := <-cfgErr
	if sendErr == nil {
		_, sendErr = io.WriteString(cfgW, goLine)
	}
	if sendErr != nil {
		// An init that refused to go on (it exited: the write's broken
		// pipe) said why on its status pipe first; that is the error.
		cfgW.Close()
		var se *setupError
		if _, err := awaitReady(ctx, sp.r); errors.As(err, &se) {
			return nil, err
		}
		return nil, fmt.Errorf("send the sandbox config: %w", sendErr)
	}
	cfgW.Close()

	st, err := awaitReady(ctx, sp.r)
	if err != nil {
		return nil, err
	}
	mk.add("host-ready")
	if c.Mode == modeServe {
		go sp.awaitStopped(p.stopped)
	}
	p.marks = append(mk, st.Marks...)
	p.enforced = enforcedBy(c, cgEnforced, st.Enforced)
	if c.Mode != modeProbe {
		p.disk = newDiskWatch(p, c, c.DiskBytes, c.DiskInodes)
	}
	return p, nil
}

// initCommand is the command that starts the init: the agentrun binary
// exe in new namespaces, running as uid and gid inside, with files (the
// config and status pipes, then the caller's extra files) from fd 3, and
// an environment of GOMAXPROCS=1 only (the program it starts gets the
// sandbox's own environment). overlay: unprivileged, it keeps what it
// needs to mount an overlay's layers (warmstart.Attr).
func initCommand(exe string, uid, gid int, overlay bool, stdin io.Reader, stdout, stderr io.Writer, files []*os.File) *exec.Cmd {
	cmd := exec.Command(exe, entryName, roleInit)
	cmd.Args[0] = "agentrun" // the host path is none of the sandbox's business
	// The init does one thing at a time until it is confined: one
	// processor makes its runtime start fewer threads, and its
	// every-thread calls (a round over all threads each: package
	// execpriv's, confine's) cheaper, the more so where the default
	// GOMAXPROCS is large. On 2
	// cores, interleaved, 8 rounds of 30 starts at load 6: 29.7 instead
	// of 32.4 ms of CPU per start (median; lower in 6 rounds of 8). The
	// runner then goes back to the default (serve).
	cmd.Env = []string{"GOMAXPROCS=1"}
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.ExtraFiles = files
	cmd.SysProcAttr = warmstart.Attr(uid, gid, overlay)
	return cmd
}

// sendConfig writes c as the init's first config line from a goroutine
// (the init reads it while the host makes the cgroups); the channel
// gets the write's error.
func sendConfig(w io.Writer, c *config) <-chan error {
	b, _ := json.Marshal(c)
	errc := make(chan error, 1)
	go func() {
		_, err := w.Write(append(b, '\n'))
		errc <- err
	}()
	return errc
}

// statusPipe reads an init's status lines (see statusLine) from a
// descriptor of its own: a serve-mode init's second line comes when its
// sandbox stops, long after the caller has closed its end.
type statusPipe struct {
	f *os.File
	r *bufio.Reader
}

func newStatusPipe(stR *os.File) (*statusPipe, error) {
	rc, err := stR.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	// Through Control, not Fd, which would make the pipe blocking.
	if cerr := rc.Control(func(f uintptr) { fd, err = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, fmt.Errorf("status pipe: %w", err)
	}
	f := os.NewFile(uintptr(fd), "status")
	return &statusPipe{f: f, r: bufio.NewReader(io.LimitReader(f, 2*maxConfigLen))}, nil
}

// awaitStopped closes stopped if the init's next line says the sandbox
// stopped (status.Stopped); an init that exits without it says nothing.
func (sp *statusPipe) awaitStopped(stopped chan<- struct{}) {
	defer sp.f.Close()
	line, err := sp.r.ReadBytes('\n')
	var st status
	if err == nil && json.Unmarshal(line, &st) == nil && st.Stopped {
		close(stopped)
	}
}

// awaitReady reads the init's status line from r: the init is ready when
// it says OK. A failed step is a *setupError.
func awaitReady(ctx context.Context, r *bufio.Reader) (status, error) {
	type answer struct {
		st  status
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := r.ReadBytes('\n')
		if err != nil && len(line) == 0 {
			ch <- answer{err: errors.New("the sandbox init exited before it was ready")}
			return
		}
		var st status
		if err := json.Unmarshal(line, &st); err != nil {
			ch <- answer{err: fmt.Errorf("read the sandbox init's status: %w", err)}
			return
		}
		ch <- answer{st: st}
	}()
	var a answer
	select {
	case a = <-ch:
	case <-ctx.Done():
		return status{}, ctx.Err()
	case <-time.After(readyTimeout):
		return status{}, errors.New("the sandbox init was not ready in time")
	}
	if a.err != nil {
		return status{}, a.err
	}
	if !a.st.OK {
		return status{}, &setupError{Step: a.st.Step, Msg: a.st.Error}
	}
	return a.st, nil
}

// enforcedBy is what a ready sandbox enforces: the namespaces, then what
// the cgroups and the init report, then the disk bound (but for a probe).
func enforcedBy(c *config, cgEnforced, initEnforced map[string]string) map[string]string {
	m := namespacesEnforced()
	maps.Copy(m, cgEnforced)
	maps.Copy(m, initEnforced)
	if c.Mode != modeProbe {
		maps.Copy(m, diskEnforced(c, c.DiskBytes, c.DiskInodes))
	}
	return m
}

// setupError is a step of the inside setup that the kernel refused.
type setupError struct {
	Step string
	Msg  string
}

func (e *setupError) Error() string { return e.Step + ": " + e.Msg }

func safeName(id string) string {
	var sb strings.Builder
	for _, r := range id {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			sb.WriteRune(r)
		}
	}
	if sb.Len() == 0 || sb.Len() > 40 {
		return "run"
	}
	return sb.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startError is the catalog error for a sandbox that did not start.
func startError(err error) error {
	if _, ok := catalog.As(err); ok {
		return err
	}
	if ll := landlockRefusal(err); ll != nil {
		return ll
	}
	return catalog.SandboxStart.Wrap(err, "native sandbox: %v", err)
}

// Command runs argv in a fresh sandbox made from spec, without a runner,
// with the given stdio, and returns its exit code (128+signal when
// killed) and what was enforced. The sandbox is gone when it returns; the
// state dir is left for the caller. For one-shot use and tests.
func (b *Backend) Command(ctx context.Context, spec sandbox.Spec, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, map[string]string, error) {
	if len(argv) == 0 {
		return -1, nil, errors.New("no command")
	}
	c, lim, err := b.makeConfig(spec, modeExec)
	if err != nil {
		return -1, nil, startError(err)
	}
	c.Argv = argv
	p, err := b.launch(ctx, spec, c, lim, stdin, stdout, stderr, nil)
	if err != nil {
		return -1, nil, startError(err)
	}
	defer p.cg.remove()
	go p.disk.Run(p.kill)
	stop := context.AfterFunc(ctx, p.kill)
	defer stop()
	p.wait()
	code := p.state.ExitCode()
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if err := p.disk.Exceeded(); err != nil {
		return code, p.enforced, err
	}
	return code, p.enforced, ctx.Err()
}

// Start implements sandbox.Backend.
func (b *Backend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	var mk marks
	mk.add("host-start")
	c, lim, err := b.makeConfig(spec, modeServe)
	if err != nil {
		return nil, startError(err)
	}
	if err := os.MkdirAll(spec.StateDir, 0o700); err != nil {
		return nil, startError(fmt.Errorf("make state dir: %w", err))
	}
	dir, err := os.Open(spec.StateDir)
	if err != nil {
		return nil, startError(err)
	}
	sock := filepath.Join(spec.StateDir, "runner.sock")
	if len(sock) >= 100 {
		// Too long for sun_path: reach it through the held directory.
		sock = fmt.Sprintf("/proc/self/fd/%d/runner.sock", dir.Fd())
	}
	os.Remove(sock)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		dir.Close()
		return nil, startError(fmt.Errorf("listen for the runner: %w", err))
	}
	ln.SetUnlinkOnClose(false)
	// Only this user may connect, whatever the umask and the dir's mode.
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		dir.Close()
		return nil, startError(fmt.Errorf("protect the runner socket: %w", err))
	}
	lf, err := ln.File()
	ln.Close()
	if err != nil {
		dir.Close()
		return nil, startError(err)
	}
	logf, err := os.OpenFile(filepath.Join(spec.StateDir, "sandbox.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		lf.Close()
		dir.Close()
		return nil, startError(err)
	}
	p, err := b.launch(ctx, spec, c, lim, nil, logf, logf, []*os.File{lf})
	lf.Close()
	logf.Close()
	if err != nil {
		// Nothing runs; leave only sandbox.log, for the reason.
		os.Remove(sock)
		os.Remove(c.Root)
		dir.Close()
		return nil, startError(err)
	}
	s := &sbox{p: p, stateDir: spec.StateDir, dir: dir, gateway: c.GatewaySocket != ""}
	dctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, cancel)
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-dctx.Done():
		}
	}()
	cl, err := runner.Dial(dctx, sock, runner.DialOptions{Wait: readyTimeout})
	stop()
	cancel()
	if err != nil {
		s.Destroy(context.Background())
		return nil, startError(fmt.Errorf("connect to the runner: %w", err))
	}
	s.client = cl
	mk.add("host-runner-answered")
	p.marks = append(append(mk[:1:1], p.marks...), mk[1])
	// Past the disk bound: kill, and fail the calls in flight at once.
	go p.disk.Run(func() { p.kill(); cl.Close() })
	// Pid 1 is the runner: once it has stopped or exited (a Stop, a
	// SIGTERM from inside, a crash, a kill) nothing serves the socket any
	// more, and no other runner will.
	go func() {
		select {
		case <-p.done:
		case <-p.stopped:
		}
		cl.Close()
	}()
	return s, nil
}

// sbox is a running native sandbox.
type sbox struct {
	p        *proc
	client   runner.Client
	stateDir string
	dir      *os.File
	gateway  bool // a gateway bridge listens inside

	mu        sync.Mutex
	destroyed bool
}

func (s *sbox) Runner() runner.Client { return s.client }
func (s *sbox) WorkDir() string       { return WorkDir }

func (s *sbox) HomeDir() string { return homeDir }

func (s *sbox) GatewayAddr() string {
	if s.gateway {
		return fmt.Sprintf("127.0.0.1:%d", gatewayPort)
	}
	return ""
}

// LimitExceeded implements sandbox.LimitStopper.
func (s *sbox) LimitExceeded() error { return s.p.disk.Exceeded() }

func (s *sbox) Enforced() map[string]string {
	m := make(map[string]string, len(s.p.enforced))
	for k, v := range s.p.enforced {
		m[k] = v
	}
	return m
}

// Stop asks the runner to end (SIGTERM: it kills its commands, then
// every process left, see quiesce), then kills the pid namespace after a
// grace period or when ctx ends. It returns once no process of the
// sandbox runs: when pid 1 says so (it then waits for Destroy to kill
// it) or has exited. Calls still waiting on the runner then fail at once
// with runner.ErrClosed instead of redialling a socket nothing serves
// any more.
func (s *sbox) Stop(ctx context.Context) error {
	select {
	case <-s.p.done:
	case <-s.p.stopped:
	default:
		s.p.process.Signal(unix.SIGTERM)
		t := time.NewTimer(stopGrace)
		select {
		case <-s.p.done:
		case <-s.p.stopped:
		case <-t.C:
			s.p.kill()
		case <-ctx.Done():
			s.p.kill()
		}
		t.Stop()
	}
	if s.client != nil {
		s.client.Close()
	}
	return nil
}

// Destroy stops the sandbox, closes the client, removes the cgroups and
// the state dir.
func (s *sbox) Destroy(ctx context.Context) error {
	s.Stop(ctx)
	// Stopped, pid 1 waits to be killed; its exit tears the namespaces
	// down, before its cgroups can go.
	s.p.kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return nil
	}
	s.destroyed = true
	if s.client != nil {
		s.client.Close()
	}
	var errs []error
	if err := s.p.cg.remove(); err != nil {
		errs = append(errs, err)
	}
	s.dir.Close()
	// RemoveTree: an overlay's work directory (HOME's) is mode 0.
	if err := workspace.RemoveTree(s.stateDir); err != nil {
		errs = append(errs, fmt.Errorf("remove sandbox state: %w", err))
	}
	return errors.Join(errs...)
}
