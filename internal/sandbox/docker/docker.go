package docker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/sandbox"
)

// Name is the backend's --sandbox name.
const Name = "docker"

// Labels on every container the backend makes. Sweep touches nothing
// without LabelRun, our owner label and the caller's state dir.
const (
	LabelRun  = "agentrun.run"
	LabelRepo = "agentrun.repo"
	// labelOwner marks what this backend made (value "agentrun").
	labelOwner = "agentrun.owner"
	// labelState is the sandbox's state dir: which data directory (and
	// so which user) the container belongs to, for Sweep.
	labelState = "agentrun.state"
)

// Options configure the backend.
type Options struct {
	// Host is the engine's address (unix:///path, tcp://host:port).
	// Default: DOCKER_HOST, else the first of the usual sockets that
	// exists (see EngineHost).
	Host string
	// Executable is the agentrun binary bind-mounted read-only into every
	// container as its entry point; it must be a static Linux build
	// (CGO_ENABLED=0). Default: os.Executable().
	Executable string
	// ReadOnlyPaths are host paths made visible read-only at the same path
	// in every sandbox; missing ones are skipped (Spec.ReadOnlyPaths, in
	// contrast, must exist).
	ReadOnlyPaths []string
	// Getenv reads DOCKER_HOST and XDG_RUNTIME_DIR (default os.Getenv).
	Getenv func(string) string
}

// Backend is the docker backend. Use New; it is a sandbox.Backend.
type Backend struct {
	opts Options

	mu   sync.Mutex
	info map[string]engineInfo // by engine host: what Start needs of it
}

// New returns the docker backend. It connects to nothing until used.
func New(opts Options) *Backend {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	return &Backend{opts: opts}
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return Name }

// Isolation implements sandbox.Backend: the container's namespaces, a
// read-only root, no capabilities and no network keep the files, the
// processes and the network; Start refuses a container that lacks them.
func (b *Backend) Isolation() sandbox.Isolation {
	return sandbox.Isolation{Files: true, Processes: true, Network: true}
}

var (
	_ sandbox.Backend       = (*Backend)(nil)
	_ sandbox.ImageResolver = (*Backend)(nil)
	_ sandbox.Sweeper       = (*Backend)(nil)
)

// EngineHost is the engine the backend talks to: host if set, else
// DOCKER_HOST, else the first existing of /var/run/docker.sock,
// $XDG_RUNTIME_DIR/podman/podman.sock (rootless Podman) and
// /run/podman/podman.sock (rootful Podman). "" when there is none.
func EngineHost(host string, getenv func(string) string) string {
	if host != "" {
		return host
	}
	if h := getenv("DOCKER_HOST"); h != "" {
		return h
	}
	cands := []string{"/var/run/docker.sock"}
	if x := getenv("XDG_RUNTIME_DIR"); x != "" {
		cands = append(cands, filepath.Join(x, "podman", "podman.sock"))
	}
	cands = append(cands, "/run/podman/podman.sock")
	for _, p := range cands {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return "unix://" + p
		}
	}
	return ""
}

// connectTimeout bounds reaching the engine and negotiating the API
// version (the client does it on its first request).
const connectTimeout = 10 * time.Second

// engine connects to the engine and negotiates the API version. Its
// errors are catalog errors (engine down, permission denied).
func (b *Backend) engine(ctx context.Context) (*client.Client, error) {
	host := EngineHost(b.opts.Host, b.opts.Getenv)
	if host == "" {
		return nil, catalog.EngineDown.Wrap(sandbox.ErrUnavailable, "no container engine: DOCKER_HOST is unset and none of /var/run/docker.sock, $XDG_RUNTIME_DIR/podman/podman.sock, /run/podman/podman.sock exists")
	}
	cl, err := client.New(client.WithHost(host), client.WithAPIVersionFromEnv(), client.WithTLSClientConfigFromEnv())
	if err != nil {
		return nil, catalog.EngineDown.Wrap(sandbox.ErrUnavailable, "%s: %v", host, err)
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if _, err := cl.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cl.Close()
		return nil, engineError(host, err)
	}
	return cl, nil
}

// engineError is the catalog error for an engine that did not answer.
func engineError(host string, err error) error {
	if errors.Is(err, syscall.EACCES) || errors.Is(err, os.ErrPermission) {
		return catalog.EnginePermission.Wrap(sandbox.ErrUnavailable, "%s: %v", host, err)
	}
	return catalog.EngineDown.Wrap(sandbox.ErrUnavailable, "%s: %v", host, err)
}

// Preflight implements sandbox.Backend: the engine answers, runs Linux
// containers, can apply the limits (not a rootless engine on cgroup v1),
// and the runner binary is there. The image is checked by
// ResolveImage (it is the run's, not the backend's).
func (b *Backend) Preflight(ctx context.Context) error {
	if _, err := b.executable(); err != nil {
		return refuse(err.Error(), "pass the agentrun binary's path, or reinstall agentrun")
	}
	cl, err := b.engine(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	info, err := cl.Info(ctx, client.InfoOptions{})
	if err != nil {
		return engineError(cl.DaemonHost(), err)
	}
	if os := info.Info.OSType; os != "" && os != "linux" {
		return refuse(fmt.Sprintf("the engine runs %s containers", os), "switch the engine to Linux containers")
	}
	host := cl.DaemonHost()
	return limitsRefusal(host, rootlessEngine(host, info.Info.SecurityOptions), info.Info.CgroupVersion)
}

func refuse(cause, fix string) error {
	return catalog.SandboxPreflight.Wrap(sandbox.ErrUnavailable, "%s", cause).WithFix("%s", fix)
}

// executable is the runner binary to mount: absolute, executable.
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
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
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

// isLocal reports whether the engine runs on this machine (a unix socket),
// so that bind mounts of host paths and sockets reach it.
func isLocal(host string) bool {
	u, err := url.Parse(host)
	return err == nil && u.Scheme == "unix"
}

// dialablePath reaches the socket path (in dir) even when it is too long
// for sun_path, through the directory's descriptor held open.
func dialablePath(dir *os.File, path string) string {
	if len(path) < 100 {
		return path
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
}

// labelValue makes s fit a label value (printable, bounded).
func labelValue(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
