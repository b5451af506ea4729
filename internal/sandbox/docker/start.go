package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/runner"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// Defaults for zero limits.
const (
	defaultPids      = 4096
	defaultFileSize  = 16 << 30
	defaultOpenFiles = 8192
	defaultDisk      = 16 << 30
	defaultInodes    = 1_000_000
	readyTimeout     = 30 * time.Second
	stopGrace        = 3 // seconds, as the engine takes it
)

// startError is the catalog error for a sandbox that did not start.
func startError(err error) error {
	if _, ok := catalog.As(err); ok {
		return err
	}
	return catalog.SandboxStart.Wrap(err, "docker sandbox: %v", err)
}

// plan is what Start asks of the engine, worked out from the spec.
type plan struct {
	create client.ContainerCreateOptions
	cfg    config
	sock   string // host path of the socket the runner dials
	home   string // host path of HOME

	diskBytes, diskInodes, fsize int64
}

// limits are the spec's limits with the backend's defaults.
type limits struct {
	memory, pids, fsize, nofile, tmp int64
	cpus                             float64
}

func resolveLimits(l sandbox.Limits, memTotal int64, ncpu int) limits {
	r := limits{memory: l.MemoryBytes, pids: orDefault(l.Pids, defaultPids), cpus: l.CPUs,
		nofile: orDefault(l.OpenFiles, defaultOpenFiles)}
	if r.memory <= 0 && memTotal > 0 {
		r.memory = memTotal / 2
	}
	if r.cpus <= 0 {
		r.cpus = float64(max(ncpu, 1))
	}
	disk := orDefault(l.DiskBytes, defaultDisk)
	r.fsize = min(orDefault(l.FileSizeBytes, defaultFileSize), disk)
	// /tmp is memory: no larger than the memory bound nor the disk bound.
	r.tmp = disk
	if r.memory > 0 {
		r.tmp = min(r.tmp, r.memory)
	}
	return r
}

func orDefault(v, d int64) int64 {
	if v > 0 {
		return v
	}
	return d
}

// makePlan checks the spec and builds the container's configuration.
func (b *Backend) makePlan(spec sandbox.Spec, eng engineInfo) (*plan, error) {
	exe, err := b.executable()
	if err != nil {
		return nil, err
	}
	if spec.Image == "" {
		return nil, catalog.NoImage.New("the %s sandbox of run %s names no image", Name, spec.RunID)
	}
	for _, p := range []struct{ name, path string }{{"workspace", spec.Workspace}, {"state dir", spec.StateDir}} {
		if p.path == "" || !filepath.IsAbs(p.path) {
			return nil, fmt.Errorf("the %s must be an absolute path, got %q", p.name, p.path)
		}
	}
	if fi, err := os.Stat(spec.Workspace); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", spec.Workspace)
	}
	lim := resolveLimits(spec.Limits, eng.memTotal, eng.ncpu)
	mounts, c, home, err := b.mounts(spec, exe)
	if err != nil {
		return nil, err
	}
	tmpfs := map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", lim.tmp)}
	c.Env = sandboxEnv(spec.Env, c.ProxyListen != "")
	c.Token = randomHex(tokenLen / 2)
	cfgJSON, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	pids := lim.pids
	hc := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		Tmpfs:          tmpfs,
		ShmSize:        min(lim.tmp, 64<<20),
		Mounts:         mounts,
		IpcMode:        "private",
		Resources: container.Resources{
			Memory:     lim.memory,
			MemorySwap: lim.memory, // no swap beyond the bound
			NanoCPUs:   int64(lim.cpus * 1e9),
			PidsLimit:  &pids,
			Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: lim.nofile, Hard: lim.nofile},
				{Name: "nproc", Soft: lim.pids, Hard: lim.pids},
				{Name: "fsize", Soft: lim.fsize, Hard: lim.fsize},
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
	}
	if low := sandbox.LowestPrivilegedPort(c.Forwards); low > 0 {
		// A forward below 1024 (a host service on 127.0.0.1:80): the
		// container's own network namespace starts its unprivileged
		// ports there, so that the runner, with no capability, binds it.
		hc.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": strconv.Itoa(low)}
	}
	if eng.podmanRootless {
		// The host user's uid is the same uid inside, so that the
		// workspace's files stay the user's.
		hc.UsernsMode = "keep-id"
	}
	labels := map[string]string{LabelRun: labelValue(spec.RunID), labelOwner: "agentrun", labelState: spec.StateDir}
	if spec.Repo != "" {
		labels[LabelRepo] = labelValue(spec.Repo)
	}
	cc := &container.Config{
		Image:      spec.Image,
		User:       fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		Hostname:   "agentrun",
		Entrypoint: []string{innerExe},
		Cmd:        []string{EntryName, roleInit},
		Env:        []string{configEnv + "=" + string(cfgJSON)},
		WorkingDir: WorkDir,
		Labels:     labels,
	}
	return &plan{
		create:    client.ContainerCreateOptions{Config: cc, HostConfig: hc, Name: containerName(spec.RunID)},
		cfg:       c,
		sock:      filepath.Join(spec.StateDir, "sock", runnerSock),
		home:      home,
		diskBytes: orDefault(spec.Limits.DiskBytes, defaultDisk), diskInodes: orDefault(spec.Limits.DiskInodes, defaultInodes),
		fsize: lim.fsize,
	}, nil
}

// mounts are the container's bind mounts (workspace, runner binary, the
// host's socket the runner dials, HOME, read-only paths, proxy and gateway sockets) and the
// inside's config for the bridges.
func (b *Backend) mounts(spec sandbox.Spec, exe string) ([]mount.Mount, config, string, error) {
	var c config
	mounts := []mount.Mount{
		bind(spec.Workspace, WorkDir, false),
		bind(exe, innerExe, true),
		bind(filepath.Join(spec.StateDir, "sock", runnerSock), innerLink, true),
	}
	home := spec.Home
	if home == "" {
		// A private HOME in the state dir (removed by Destroy): a tmpfs
		// would be root's, and engines differ in how to give it away.
		home = filepath.Join(spec.StateDir, "home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, c, "", fmt.Errorf("make the sandbox's home: %w", err)
		}
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return nil, c, "", fmt.Errorf("home %s is not a directory", home)
	}
	mounts = append(mounts, bind(home, homeDir, false))
	ro, err := b.readOnlyPaths(spec.ReadOnlyPaths)
	if err != nil {
		return nil, c, "", err
	}
	for _, p := range ro {
		mounts = append(mounts, bind(p, p, true))
	}
	switch spec.Network {
	case sandbox.NetworkNone, "":
	case sandbox.NetworkAllowlist:
		if err := isSocket("egress proxy", spec.ProxySocket); err != nil {
			return nil, c, "", err
		}
		mounts = append(mounts, bind(spec.ProxySocket, innerProxy, true))
		c.ProxyListen, c.Forwards = fmt.Sprintf("127.0.0.1:%d", proxyPort), spec.Forwards
	default:
		return nil, c, "", fmt.Errorf("network %q is not supported by the docker sandbox (use none or allowlist)", spec.Network)
	}
	if spec.GatewaySocket != "" {
		if err := isSocket("model gateway", spec.GatewaySocket); err != nil {
			return nil, c, "", err
		}
		mounts = append(mounts, bind(spec.GatewaySocket, innerGate, true))
		c.GatewayListen = fmt.Sprintf("127.0.0.1:%d", gatewayPort)
	}
	return mounts, c, home, nil
}

func bind(src, dst string, ro bool) mount.Mount {
	return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: ro,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}}
}

func isSocket(what, p string) error {
	if p == "" {
		return fmt.Errorf("the %s's socket is not set", what)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s socket %s is not a unix socket", what, p)
	}
	return nil
}

// readOnlyPaths are the backend's (skipped when missing) and the spec's
// (which must exist) read-only paths, absolute and clean. None may cover
// the places the sandbox's own mounts take.
func (b *Backend) readOnlyPaths(named []string) ([]string, error) {
	var out []string
	add := func(p string, must bool) error {
		if err := checkReadOnlyTarget(p); err != nil {
			return err
		}
		p = filepath.Clean(p)
		if _, err := os.Stat(p); err != nil {
			if must {
				return fmt.Errorf("read-only path: %w", err)
			}
			return nil
		}
		out = append(out, p)
		return nil
	}
	for _, p := range b.opts.ReadOnlyPaths {
		if err := add(p, false); err != nil {
			return nil, err
		}
	}
	for _, p := range named {
		if err := add(p, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ownMounts are the container's own: no read-only path may cover one,
// nor lie under one but /tmp (a tmpfs: a path under it is bound on it).
var ownMounts = []string{WorkDir, homeDir, innerDir, "/tmp", "/proc", "/dev", "/sys"}

// checkReadOnlyTarget says why p cannot be a read-only path of a
// container (nil: it can).
func checkReadOnlyTarget(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("read-only path %q is not absolute", p)
	}
	p = filepath.Clean(p)
	if p == "/" {
		return fmt.Errorf("read-only path %s would cover the whole root", p)
	}
	for _, own := range ownMounts {
		if p == own || strings.HasPrefix(own, p+"/") {
			return fmt.Errorf("read-only path %s would cover the sandbox's own %s", p, own)
		}
		if own != "/tmp" && strings.HasPrefix(p, own+"/") {
			return fmt.Errorf("read-only path %s lies under the sandbox's own %s", p, own)
		}
	}
	return nil
}

// CheckReadOnly implements sandbox.ReadOnlyChecker.
func (b *Backend) CheckReadOnly(p string) error { return checkReadOnlyTarget(p) }

// sandboxEnv is the spec's environment with HOME, TMPDIR and PATH set for
// the inside, and the proxy variables when egress goes through the bridge.
func sandboxEnv(base []string, proxy bool) []string {
	set := map[string]string{"HOME": homeDir, "TMPDIR": "/tmp"}
	order := []string{"HOME", "TMPDIR"}
	if proxy {
		u := fmt.Sprintf("http://127.0.0.1:%d", proxyPort)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
			set[k] = u
			order = append(order, k)
		}
		set["NO_PROXY"], set["no_proxy"] = "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"
		order = append(order, "NO_PROXY", "no_proxy")
		for _, kv := range sandbox.JVMProxyEnv("127.0.0.1", proxyPort) {
			k, v, _ := strings.Cut(kv, "=")
			set[k] = v
			order = append(order, k)
		}
	}
	env := make([]string, 0, len(base)+len(order)+1)
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
	for _, k := range order {
		env = append(env, k+"="+set[k])
	}
	return env
}

// containerName is unique per start: the run id (as far as a name may
// carry it) and a random suffix.
func containerName(runID string) string {
	var sb strings.Builder
	for _, r := range runID {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			sb.WriteRune(r)
		}
	}
	id := sb.String()
	if id == "" || len(id) > 40 {
		id = "run"
	}
	return "agentrun-" + id + "-" + randomHex(4)
}

// engineInfo is what Start needs to know of the engine.
type engineInfo struct {
	memTotal       int64
	ncpu           int
	podmanRootless bool
	rootless       bool
	seccomp        string // the engine's seccomp profile, "" when none
	cgroupVersion  string
}

// engineInfo is the engine's info, asked once per engine and backend (an
// engine's Info gathers its storage's state, which takes a while; what is
// kept of it does not change while it runs).
func (b *Backend) engineInfo(ctx context.Context, cl *client.Client) (engineInfo, error) {
	b.mu.Lock()
	e, ok := b.info[cl.DaemonHost()]
	b.mu.Unlock()
	if ok {
		return e, nil
	}
	e, err := readEngineInfo(ctx, cl)
	if err != nil {
		return e, err
	}
	b.mu.Lock()
	if b.info == nil {
		b.info = map[string]engineInfo{}
	}
	b.info[cl.DaemonHost()] = e
	b.mu.Unlock()
	return e, nil
}

func readEngineInfo(ctx context.Context, cl *client.Client) (engineInfo, error) {
	res, err := cl.Info(ctx, client.InfoOptions{})
	if err != nil {
		return engineInfo{}, engineError(cl.DaemonHost(), err)
	}
	in := res.Info
	e := engineInfo{memTotal: in.MemTotal, ncpu: in.NCPU}
	for _, o := range in.SecurityOptions {
		for _, kv := range strings.Split(o, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch {
			case k == "name" && v == "rootless":
				e.rootless = true
			case k == "name" && v == "seccomp":
				e.seccomp = "default"
			case k == "profile" && e.seccomp != "":
				e.seccomp = v
			}
		}
	}
	if e.ncpu <= 0 {
		e.ncpu = runtime.NumCPU()
	}
	// Podman's /info does not name rootless: its socket's owner tells.
	e.rootless = e.rootless || rootlessEngine(cl.DaemonHost(), in.SecurityOptions)
	e.cgroupVersion = in.CgroupVersion
	if e.rootless && isPodman(ctx, cl) {
		e.podmanRootless = true
	}
	return e, nil
}

// isPodman reports whether the engine is Podman (its version names a
// "Podman Engine" component).
func isPodman(ctx context.Context, cl *client.Client) bool {
	v, err := cl.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return false
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			return true
		}
	}
	return false
}

// Start implements sandbox.Backend: create and start the container, wait
// for the runner's socket, read back what the engine applied. On error
// nothing is left: the container is removed.
func (b *Backend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	cl, err := b.engine(ctx)
	if err != nil {
		return nil, err
	}
	s, err := b.start(ctx, cl, spec)
	if err != nil {
		cl.Close()
		return nil, startError(err)
	}
	return s, nil
}

func (b *Backend) start(ctx context.Context, cl *client.Client, spec sandbox.Spec) (_ *sbox, err error) {
	if !isLocal(cl.DaemonHost()) {
		return nil, fmt.Errorf("the engine at %s is not on this machine: the workspace and the runner's socket are bind mounts of host paths", cl.DaemonHost())
	}
	eng, err := b.engineInfo(ctx, cl)
	if err != nil {
		return nil, err
	}
	// Again at each start: submit caches its preflight.
	if err := limitsRefusal(cl.DaemonHost(), eng.rootless, eng.cgroupVersion); err != nil {
		return nil, err
	}
	p, err := b.makePlan(spec, eng)
	if err != nil {
		return nil, err
	}
	sockDir := filepath.Dir(p.sock)
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("make the runner's socket dir: %w", err)
	}
	dir, err := os.Open(sockDir)
	if err != nil {
		return nil, err
	}
	os.Remove(p.sock)
	// Listening before the container exists: the mount's source must be
	// there, and the runner dials as soon as it starts.
	lk, err := listenLink(dir, p.sock, p.cfg.Token)
	dir.Close()
	if err != nil {
		return nil, fmt.Errorf("listen for the runner: %w", err)
	}
	created, err := cl.ContainerCreate(ctx, p.create)
	if err != nil {
		lk.Close()
		if cerrNotFound(err) {
			return nil, catalog.ImageMissing.New("%s is not on the engine at %s", spec.Image, cl.DaemonHost())
		}
		return nil, fmt.Errorf("create the container: %w", err)
	}
	s := &sbox{cl: cl, id: created.ID, stateDir: spec.StateDir, link: lk, done: make(chan struct{}),
		gateway: p.cfg.GatewayListen != ""}
	defer func() {
		if err != nil {
			s.Destroy(context.WithoutCancel(ctx))
		}
	}()
	if _, err := cl.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("start the container: %w", err)
	}
	go s.watch()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-dctx.Done():
		}
	}()
	rctx, rcancel := context.WithTimeout(dctx, readyTimeout)
	defer rcancel()
	rc, err := runner.Dial(rctx, p.sock, runner.DialOptions{Dial: lk.Dial})
	if err != nil {
		if why := s.logs(ctx); why != "" {
			return nil, fmt.Errorf("the sandbox's runner did not start: %s", why)
		}
		return nil, fmt.Errorf("connect to the runner: %w", err)
	}
	s.client = rc
	insp, err := cl.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect the container: %w", err)
	}
	s.enforced = enforced(insp.Container, eng)
	s.enforced["disk"] = diskEnforced(p)
	s.watchDisk(spec, p, insp.Container.State)
	return s, nil
}

func cerrNotFound(err error) bool {
	var nf interface{ NotFound() }
	return errors.As(err, &nf) || strings.Contains(err.Error(), "No such image") || strings.Contains(err.Error(), "image not known")
}

// logs is the tail of what the container printed (the inside's reason to
// stop), one line.
func (s *sbox) logs(ctx context.Context) string {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	<-s.doneOrTimeout(2 * time.Second)
	rd, err := s.cl.ContainerLogs(lctx, s.id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return ""
	}
	defer rd.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, io.LimitReader(rd, 64<<10))
	return strings.Join(strings.Fields(out.String()), " ")
}

func (s *sbox) doneOrTimeout(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
		}
		close(ch)
	}()
	return ch
}

// watch closes done when the container is no longer running.
func (s *sbox) watch() {
	defer close(s.done)
	for {
		w := s.cl.ContainerWait(context.Background(), s.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case <-w.Result:
			return
		case <-w.Error:
			// The wait was cut: ask again, unless the container is gone
			// or stopped.
			insp, err := s.cl.ContainerInspect(context.Background(), s.id, client.ContainerInspectOptions{})
			if err != nil || insp.Container.State == nil || !insp.Container.State.Running {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
