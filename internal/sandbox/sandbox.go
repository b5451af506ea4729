package sandbox

import (
	"context"
	"errors"

	"github.com/agentrun/agentrun/internal/runner"
)

// NetworkMode is what the sandbox may reach.
type NetworkMode string

const (
	NetworkNone      NetworkMode = "none"      // loopback only
	NetworkAllowlist NetworkMode = "allowlist" // loopback + relay to the egress proxy
	NetworkHost      NetworkMode = "host"      // the host's network (host backend only)
)

// Spec describes one sandbox.
type Spec struct {
	RunID string
	// Repo is the user's repository the run works on (a label for the
	// backends that label what they make; nothing is read from it).
	Repo string
	// Workspace is the host path of the agent's tree. It is the only
	// host path the sandbox may write (besides its private Home and tmp).
	Workspace string
	// Home is a host directory (inside the run directory) used as HOME.
	Home string
	// StateDir is a host directory private to the sandbox backend (sockets,
	// pid files). It is inside the run directory and removed by Destroy.
	StateDir string
	// Env is the complete base environment (KEY=VALUE) of processes inside;
	// nothing of the supervisor's own environment leaks in.
	Env []string
	// Network and, for NetworkAllowlist, the host unix socket of the
	// egress proxy that the in-sandbox relay forwards to.
	Network     NetworkMode
	ProxySocket string
	// LoopbackTCP lets processes inside connect to any TCP port of the
	// sandbox's own loopback. Without it a backend that can (native with
	// Landlock ABI >= 4) allows TCP connect only to the bridges.
	LoopbackTCP bool
	// Forwards are this machine's loopback services (127.0.0.1:PORT) the
	// allowlist admits: with a ProxySocket, processes inside reach each
	// at the same address, through a listener there that tunnels to the
	// egress proxy (the sandbox's own loopback is not the host's). A
	// port below 1024 is bound too: the backend starts the unprivileged
	// ports of the sandbox's network namespace at the lowest such
	// forward (LowestPrivilegedPort).
	Forwards []string
	// GatewaySocket, when set, is the host unix socket of the run's model
	// gateway. Every backend bridges it to a TCP port on the sandbox's own
	// loopback (Sandbox.GatewayAddr), whatever the network mode: the agent
	// reaches its model without any egress.
	GatewaySocket string
	// ReadOnlyPaths are extra host paths made visible read-only.
	ReadOnlyPaths []string
	Limits        Limits
	// Image is the image a backend that runs images (an ImageResolver)
	// starts the sandbox from: what its ResolveImage returned as ID,
	// immutable. Other backends ignore it.
	Image string
	// Layers, when set, give the workspace as an overlay: the backend
	// mounts them as one tree where processes inside work (Workspace is
	// then Layers.Upper, the host directory that receives the changes).
	// Only a LayerMounter whose ProbeLayers succeeded is given them.
	Layers *Layers
}

// Layers are the host directories of an overlay workspace: Lower, the
// read-only base (never written, never visible but through the overlay),
// Upper, where changes go, and Work, the kernel's (on Upper's file
// system).
type Layers struct {
	Lower, Upper, Work string
	// Above are further read-only layers over Lower, uppermost first
	// (the run's setup layer): never written either.
	Above []string
}

// LayerMounter is implemented by a backend that can give its sandboxes
// the workspace as an overlay of Spec.Layers.
type LayerMounter interface {
	// ProbeLayers mounts a throwaway overlay, whose layers it makes in a
	// new directory under scratch (on the file system the real layers
	// will be on), the way a sandbox would, and writes through it. It
	// returns nil when sandboxes started now can mount Spec.Layers, or
	// why not; it removes what it made. A backend may remember a success
	// in scratch for as long as it holds (the native one: the boot).
	ProbeLayers(ctx context.Context, scratch string) error
}

// Prewarmer is implemented by a backend that can start a sandbox's first
// process ahead of the sandbox, before its Spec is known, so that the
// next Start of the same backend value skips that part (the native
// backend's init: a process in new namespaces, its runtime started).
// Prewarm returns at once; what it started is used by the next Start, or
// ended when ctx ends first. Without one ready, Start starts as always.
// A second Prewarm before Start starts nothing: what was started lasts
// for its ctx instead, so Prewarm with an ended ctx gives it up.
type Prewarmer interface {
	Prewarm(ctx context.Context)
}

// ReadOnlyChecker is implemented by a backend whose own mounts keep some
// host paths from being shown read-only at their own paths (its
// workspace, HOME, /proc). CheckReadOnly says why p cannot be one of Spec.ReadOnlyPaths (nil:
// it can), so that a run that needs p is refused before it is created
// rather than when its sandbox starts.
type ReadOnlyChecker interface {
	CheckReadOnly(p string) error
}

// Limits bound the sandbox; zero means the backend's default.
type Limits struct {
	MemoryBytes   int64
	Pids          int64
	CPUs          float64
	FileSizeBytes int64
	OpenFiles     int64
	// DiskBytes and DiskInodes bound the workspace, HOME, /tmp and
	// /dev/shm together (zero: the backend's default).
	DiskBytes  int64
	DiskInodes int64
}

// Backend is the sandbox backend seam. Implementations: host, native, docker.
// Register them in sandbox/all. Every one passes sandboxtest.
type Backend interface {
	// Name is the --sandbox name.
	Name() string
	// Preflight checks that the backend can start sandboxes on this machine.
	// It returns a catalog error saying what is missing and how to fix it.
	// It never degrades to less isolation.
	Preflight(ctx context.Context) error
	// Start creates and starts a sandbox. On error nothing is left running.
	Start(ctx context.Context, spec Spec) (Sandbox, error)
	// Isolation declares what the backend's sandboxes keep the agent
	// from. Submit warns about, and status shows, a backend that isolates
	// nothing; nobody branches on a backend's name.
	Isolation() Isolation
}

// Isolation is what a backend isolates (each true: in every sandbox it
// starts, not only where the machine allows; what a given sandbox
// enforces is its Enforced).
type Isolation struct {
	// Files: only the workspace, the sandbox's own HOME and tmp, and
	// named read-only paths are visible.
	Files bool
	// Processes: the host's processes are out of reach.
	Processes bool
	// Network: the sandbox reaches only what its network mode grants.
	Network bool
}

// None reports a backend that isolates nothing (it runs the agent as the
// user, with the user's files and network).
func (i Isolation) None() bool { return !i.Files && !i.Processes && !i.Network }

// Sandbox is one running sandbox.
type Sandbox interface {
	// Runner is the client to the runner serving inside this sandbox.
	Runner() runner.Client
	// WorkDir is the workspace path as processes inside see it.
	WorkDir() string
	// HomeDir is HOME as processes inside see it.
	HomeDir() string
	// GatewayAddr is the model gateway's HOST:PORT as processes inside
	// reach it ("" when the spec named no gateway socket).
	GatewayAddr() string
	// Enforced says, per isolation feature or limit, "enforced" or
	// "unavailable: <why>". It never claims what is not in force.
	Enforced() map[string]string
	// Stop ends every process in the sandbox. Safe to call twice.
	Stop(ctx context.Context) error
	// Destroy stops the sandbox and removes what Start made (not the
	// workspace). Safe to call twice and after Stop.
	Destroy(ctx context.Context) error
}

// ErrUnavailable is wrapped by Preflight/Start errors when the backend
// cannot run here.
var ErrUnavailable = errors.New("sandbox backend unavailable")

// LimitWarner is implemented by a backend that can tell, before a run,
// which of its limits would not be in force on this machine.
type LimitWarner interface {
	// LimitWarnings returns one line per limit of lim (or its default)
	// that a sandbox started now would not enforce, or bound only in part.
	LimitWarnings(ctx context.Context, lim Limits) []string
}

// LimitStopper is implemented by a sandbox that stops itself when a limit
// it samples (rather than the kernel enforcing it) is passed.
type LimitStopper interface {
	// LimitExceeded is nil, or why the sandbox was killed.
	LimitExceeded() error
}

// ErrDiskExceeded is wrapped by LimitExceeded when the disk bound was
// passed.
var ErrDiskExceeded = errors.New("the sandbox passed its disk bound")

// Exceeded is sb's LimitExceeded, or nil when sb samples no limit.
func Exceeded(sb Sandbox) error {
	if ls, ok := sb.(LimitStopper); ok {
		return ls.LimitExceeded()
	}
	return nil
}

// ImageResolver is implemented by a backend that starts its sandboxes from
// an image (docker). Such a backend needs Spec.Image.
type ImageResolver interface {
	// ResolveImage checks, before a run, that ref names an image the
	// backend has, pinned: REF@sha256:DIGEST, a full image id, or a tag
	// that pins (tag -> "sha256:DIGEST", from the user's config) maps to
	// a digest the image matches. It never pulls. Its errors are catalog
	// errors: no image, not pinned, missing, a digest mismatch.
	ResolveImage(ctx context.Context, ref string, pins map[string]string) (Image, error)
}

// Image is a resolved image.
type Image struct {
	// Ref is the image as the user named it.
	Ref string
	// ID is what Spec.Image takes: the engine's image id (sha256:...),
	// which names this image's content and nothing else.
	ID string
	// Digests are the image's repository digests (NAME@sha256:...), if it
	// came from a registry.
	Digests []string
}

// Sweeper is implemented by a backend whose sandboxes can outlive their
// supervisor (a container engine keeps a container when the supervisor
// is killed).
type Sweeper interface {
	// Sweep removes the sandboxes this backend made for one data
	// directory, those whose Spec.StateDir was stateDir(runID), whose run
	// is not active, and nothing else (not another data directory's, not
	// another user's on a shared engine), and returns what it removed.
	// With no engine to reach it removes nothing and returns no error.
	Sweep(ctx context.Context, stateDir func(runID string) string, active func(runID string) bool) ([]Swept, error)
}

// Swept is one sandbox a Sweeper removed.
type Swept struct {
	ID    string `json:"id"` // the backend's name for it (a container id)
	RunID string `json:"run_id"`
}
