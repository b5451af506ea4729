package native

import (
	"github.com/agentrun/agentrun/internal/sandbox/native/execpriv"
	"github.com/agentrun/agentrun/internal/workspace/overlay"
)

// Paths as processes inside the sandbox see them.
const (
	WorkDir      = "/workspace"
	homeDir      = "/home/agent"
	innerDir     = "/.agentrun"
	sandboxHost  = "agentrun"
	proxyPort    = 3128
	gatewayPort  = 3129
	entryName    = execpriv.Entry
	defaultPath  = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
	statusOK     = "ok"
	modeServe    = "serve"
	modeExec     = "exec"
	modeProbe    = "probe"
	roleInit     = execpriv.Role
	cfgFD        = 3 // the init's config pipe
	statusFD     = 4 // the init's status pipe
	listenerFD   = 5 // the runner's listening socket (serve mode)
	maxConfigLen = 1 << 20
)

// goLine is the host's second line on the init's fd 3: the init is in its
// cgroups, the sandboxed program may start.
const goLine = "go\n"

// config is what the host tells the init, as one line of JSON on fd 3.
type config struct {
	Mode string   `json:"mode"`
	Argv []string `json:"argv,omitempty"` // modeExec

	UID int `json:"uid"` // the uid/gid processes run as inside
	GID int `json:"gid"`
	// Root is a host directory (inside the state dir) the new root's tmpfs
	// is mounted on, in the sandbox's mount namespace only.
	Root      string `json:"root"`
	Workspace string `json:"workspace"`
	// Layers, when set, are mounted as an overlay at WorkDir instead of
	// binding Workspace (which is then their upper layer).
	Layers *overlay.Layers `json:"layers,omitempty"`
	Home   string          `json:"home,omitempty"` // empty: a private tmpfs
	// HomeLayers, when set, mount Home (their upper layer, over an empty
	// lower) as an overlay instead of a bind: a bind's mountinfo names
	// its source path, an overlay's names only /proc/self/fd/N. Set where
	// the workspace is an overlay too (the kernel allows it here).
	HomeLayers  *overlay.Layers `json:"home_layers,omitempty"`
	Executable  string          `json:"executable"`
	ProxySocket string          `json:"proxy_socket,omitempty"`
	// Forwards are the host's loopback services reached through the
	// proxy at the same address inside (sandbox.Spec.Forwards).
	Forwards []string `json:"forwards,omitempty"`
	// HostNetNS is the inode of the starting process's network namespace
	// (the host's), which the init, in a namespace of its own, tells
	// itself apart from before it changes a setting of its own there.
	HostNetNS uint64 `json:"host_netns,omitempty"`
	// GatewaySocket is the model gateway's host socket, bridged to
	// 127.0.0.1:gatewayPort inside (with any network mode).
	GatewaySocket string   `json:"gateway_socket,omitempty"`
	LoopbackTCP   bool     `json:"loopback_tcp,omitempty"`
	ReadOnly      []string `json:"read_only,omitempty"`
	Env           []string `json:"env"`

	FileSize  int64 `json:"file_size"`
	OpenFiles int64 `json:"open_files"`
	Nproc     int64 `json:"nproc"`      // 0: not set (root shares the host count)
	TmpSize   int64 `json:"tmp_size"`   // bytes of each tmpfs (/tmp, /dev/shm, HOME)
	TmpInodes int64 `json:"tmp_inodes"` // inodes of each of them
	// DiskBytes and DiskInodes are the sandbox's disk bound (host side:
	// the disk watch; the init uses TmpSize, TmpInodes and FileSize).
	DiskBytes  int64 `json:"disk_bytes"`
	DiskInodes int64 `json:"disk_inodes"`

	// AllowNoLandlock: the user opted in to run on a kernel without
	// Landlock; without it the init refuses (step "landlock").
	AllowNoLandlock bool `json:"allow_no_landlock,omitempty"`

	// listener is the init's own record (never sent) of the runner's
	// listening socket in serve mode: listenerFD, or where an init
	// started ahead received it (receiveFiles).
	listener int
}

// status is the init's one-line answer on fd 4: ready, or why not.
type status struct {
	OK       bool              `json:"ok"`
	Error    string            `json:"error,omitempty"`
	Step     string            `json:"step,omitempty"`
	Enforced map[string]string `json:"enforced,omitempty"`
	Marks    marks             `json:"marks,omitempty"`
	// Stopped is a serve-mode init's second line: every process of the
	// sandbox has ended and been reaped; pid 1 waits to be killed (see
	// quiesce).
	Stopped bool `json:"stopped,omitempty"`
}

// mark is when a step of a sandbox's start ended, in nanoseconds of
// CLOCK_MONOTONIC: one clock for the host and every process inside, so
// that a benchmark can say where a start's time goes.
type mark struct {
	Step string `json:"step"`
	At   int64  `json:"at"`
}

type marks []mark
