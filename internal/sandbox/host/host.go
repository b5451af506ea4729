package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentrun/agentrun/internal/pidtemp"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// Name is the backend's --sandbox name.
const Name = "host"

// Options configure the backend.
type Options struct {
	// Subprocess serves the runner as a child process (`Executable
	// __runner`) instead of inside the calling process.
	Subprocess bool
	// Executable is the agentrun binary for Subprocess (default: the
	// running executable).
	Executable string
}

// New returns the host backend serving the runner in-process (the faster
// way: see BenchmarkStart).
func New() sandbox.Backend { return &backend{} }

// NewWithOptions returns the host backend configured by opts.
func NewWithOptions(opts Options) sandbox.Backend { return &backend{opts: opts} }

type backend struct{ opts Options }

func (b *backend) Name() string { return Name }

// Isolation: none. The agent runs as the user, with the user's files and
// network; the backend is used only when named.
func (b *backend) Isolation() sandbox.Isolation { return sandbox.Isolation{} }

// Preflight always succeeds: the host backend needs nothing.
func (b *backend) Preflight(ctx context.Context) error { return nil }

// maxSocketPath keeps socket paths under the ~104-byte limit of sun_path.
const maxSocketPath = 100

// sockDirPrefix names the directory in the temporary directory that holds
// the runner's socket when its path in the state directory is too long:
// named after the process that made it (pidtemp), so that where it is
// killed before Destroy, the next sandbox's start removes it.
const sockDirPrefix = "agentrun-sock-"

// Start makes the state dir, HOME and TMPDIR, serves the runner on a unix
// socket and dials it. On error nothing is left running.
func (b *backend) Start(ctx context.Context, spec sandbox.Spec) (_ sandbox.Sandbox, err error) {
	if spec.Workspace == "" || spec.StateDir == "" {
		return nil, errors.New("host sandbox: spec needs Workspace and StateDir")
	}
	if spec.Layers != nil {
		// Not a LayerMounter: the agent would find only the changes.
		return nil, errors.New("host sandbox: cannot mount an overlay workspace")
	}
	ws, err := filepath.Abs(spec.Workspace)
	if err != nil {
		return nil, fmt.Errorf("host sandbox: %w", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("host sandbox: workspace %s is not a directory", ws)
	}
	if spec.Network == sandbox.NetworkAllowlist && spec.ProxySocket == "" {
		return nil, errors.New("host sandbox: allowlist network needs a proxy socket")
	}
	s := &hostSandbox{spec: spec, workDir: ws}
	defer func() {
		if err != nil {
			s.Destroy(context.Background())
		}
	}()
	if err := os.MkdirAll(spec.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("host sandbox: state dir: %w", err)
	}
	tmp := filepath.Join(spec.StateDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("host sandbox: tmp: %w", err)
	}
	s.made = append(s.made, tmp)
	home := spec.Home
	if home == "" {
		home = filepath.Join(spec.StateDir, "home")
	}
	if _, err := os.Stat(home); os.IsNotExist(err) {
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, fmt.Errorf("host sandbox: home: %w", err)
		}
		s.made = append(s.made, home)
	}

	s.home = home
	env := setEnv(append([]string(nil), spec.Env...), "HOME", home)
	env = setEnv(env, "TMPDIR", tmp)
	if spec.Network == sandbox.NetworkAllowlist {
		br, err := runner.ListenBridge("127.0.0.1:0", spec.ProxySocket)
		if err != nil {
			return nil, fmt.Errorf("host sandbox: %w", err)
		}
		s.bridge = br
		go br.Serve()
		proxy := "http://" + br.Addr().String()
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env = setEnv(env, k, proxy)
		}
		env = setEnv(env, "NO_PROXY", "localhost,127.0.0.1,::1")
		env = setEnv(env, "no_proxy", "localhost,127.0.0.1,::1")
		for _, kv := range sandbox.JVMProxyEnv("127.0.0.1", br.Addr().(*net.TCPAddr).Port) {
			k, v, _ := strings.Cut(kv, "=")
			env = setEnv(env, k, v)
		}
	}
	s.env = env
	if spec.GatewaySocket != "" {
		br, err := runner.ListenBridge("127.0.0.1:0", spec.GatewaySocket)
		if err != nil {
			return nil, fmt.Errorf("host sandbox: %w", err)
		}
		s.gateway = br
		go br.Serve()
	}

	sockDir := spec.StateDir
	if len(filepath.Join(sockDir, "runner.sock")) > maxSocketPath {
		d, err := pidtemp.MkdirTemp(sockDirPrefix)
		if err != nil {
			return nil, fmt.Errorf("host sandbox: socket dir: %w", err)
		}
		sockDir = d
		s.made = append(s.made, d)
	}
	sock := filepath.Join(sockDir, "runner.sock")
	s.made = append(s.made, sock)
	if b.opts.Subprocess {
		err = s.startSubprocess(b.opts.Executable, sock)
	} else {
		err = s.startInProcess(sock)
	}
	if err != nil {
		return nil, err
	}
	cl, err := s.dial(ctx, sock)
	if err != nil {
		return nil, err
	}
	s.client = cl
	return s, nil
}

// dial connects to the runner, failing at once if a runner subprocess
// exits before it listens.
func (s *hostSandbox) dial(ctx context.Context, sock string) (runner.Client, error) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type dialed struct {
		cl  runner.Client
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		cl, err := runner.Dial(dctx, sock, runner.DialOptions{Wait: 10 * time.Second})
		ch <- dialed{cl, err}
	}()
	select {
	case d := <-ch:
		if d.err != nil {
			return nil, fmt.Errorf("host sandbox: %w", d.err)
		}
		return d.cl, nil
	case err := <-s.served:
		s.served <- err // Stop reads it again
		cancel()
		if d := <-ch; d.cl != nil {
			d.cl.Close()
		}
		return nil, fmt.Errorf("host sandbox: runner exited before serving (%v): %s", err, strings.TrimSpace(s.stderr.String()))
	}
}

func (s *hostSandbox) startInProcess(sock string) error {
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("host sandbox: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.served = make(chan error, 1)
	go func() {
		s.served <- runner.Serve(ctx, ln, runner.ServerOptions{Root: s.workDir, Env: s.env, StateDir: s.spec.StateDir})
	}()
	return nil
}

func (s *hostSandbox) startSubprocess(exe, sock string) error {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("host sandbox: %w", err)
		}
	}
	envFile := filepath.Join(s.spec.StateDir, "runner.env")
	if err := os.WriteFile(envFile, []byte(strings.Join(s.env, "\x00")), 0o600); err != nil {
		return fmt.Errorf("host sandbox: env file: %w", err)
	}
	s.made = append(s.made, envFile)
	cmd := exec.Command(exe, "__runner", "--socket", sock, "--root", s.workDir, "--state", s.spec.StateDir, "--env-file", envFile)
	cmd.Env = []string{}
	cmd.Dir = s.workDir
	cmd.SysProcAttr = sysProcAttr()
	cmd.Stderr = &s.stderr
	stdin, err := cmd.StdinPipe() // EOF when we die: the runner stops
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("host sandbox: start runner: %w", err)
	}
	s.proc, s.procStdin = cmd, stdin
	s.served = make(chan error, 1)
	go func() { s.served <- cmd.Wait() }()
	return nil
}

type hostSandbox struct {
	spec      sandbox.Spec
	workDir   string
	env       []string
	client    runner.Client
	bridge    *runner.Bridge
	gateway   *runner.Bridge
	home      string
	cancel    context.CancelFunc // in-process server
	proc      *exec.Cmd          // subprocess server
	procStdin interface{ Close() error }
	served    chan error
	stderr    limitedBuffer // of a runner subprocess
	made      []string

	mu        sync.Mutex
	stopped   bool
	destroyed bool
}

func (s *hostSandbox) Runner() runner.Client { return s.client }

func (s *hostSandbox) WorkDir() string { return s.workDir }

func (s *hostSandbox) HomeDir() string { return s.home }

func (s *hostSandbox) GatewayAddr() string {
	if s.gateway == nil {
		return ""
	}
	return s.gateway.Addr().String()
}

const notIsolated = "unavailable: host backend does not isolate"

// Enforced names every isolation feature as unavailable.
func (s *hostSandbox) Enforced() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"namespaces", "filesystem", "seccomp", "landlock", "no_new_privs", "caps",
		"rlimit_fsize", "rlimit_nofile", "rlimit_nproc", "memory", "pids", "cpu",
	} {
		m[k] = notIsolated
	}
	switch s.spec.Network {
	case sandbox.NetworkAllowlist:
		m["network"] = notIsolated + " (HTTP_PROXY points at the egress proxy; cooperative only)"
	default:
		m["network"] = notIsolated
	}
	m["environment"] = "enforced" // exactly Spec.Env, HOME and TMPDIR
	m["process_groups"] = "enforced"
	return m
}

// Stop kills every command still running, then the runner. Safe to call
// twice and before Start finished.
func (s *hostSandbox) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	if s.client != nil {
		s.client.Close()
	}
	var err error
	switch {
	case s.cancel != nil:
		s.cancel() // Serve kills every process group, then returns
		err = wait(ctx, s.served)
	case s.proc != nil:
		s.proc.Process.Signal(syscall.SIGTERM)
		s.procStdin.Close()
		select {
		case <-s.served: // its exit status after SIGTERM is not an error
		case <-ctx.Done():
			s.proc.Process.Kill()
			<-s.served
			err = fmt.Errorf("host sandbox stop: %w", ctx.Err())
		}
	}
	if s.bridge != nil {
		s.bridge.Close()
	}
	if s.gateway != nil {
		s.gateway.Close()
	}
	return err
}

func wait(ctx context.Context, ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("host sandbox stop: %w", ctx.Err())
	}
}

// Destroy stops the sandbox and removes what Start made (never the
// workspace). Safe to call twice and after Stop.
func (s *hostSandbox) Destroy(ctx context.Context) error {
	err := s.Stop(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.destroyed {
		return err
	}
	s.destroyed = true
	for i := len(s.made) - 1; i >= 0; i-- {
		if rerr := os.RemoveAll(s.made[i]); rerr != nil && err == nil {
			err = fmt.Errorf("host sandbox destroy: %w", rerr)
		}
	}
	// The state dir is private to the backend: it goes too.
	if rerr := os.RemoveAll(s.spec.StateDir); rerr != nil && err == nil {
		err = fmt.Errorf("host sandbox destroy: %w", rerr)
	}
	return err
}

// setEnv sets key in env, replacing every earlier value.
func setEnv(env []string, key, value string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
