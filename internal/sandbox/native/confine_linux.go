package native

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"github.com/agentrun/agentrun/internal/sandbox/native/execpriv"
	"github.com/agentrun/agentrun/internal/sandbox/seccomp"
	"golang.org/x/sys/unix"
)

// setRlimits sets the process's resource limits (inherited by everything
// the sandbox starts) and says which it set.
func setRlimits(c *config) (map[string]string, error) {
	out := map[string]string{}
	set := func(key string, res int, v int64) error {
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(res, &cur); err != nil {
			return fmt.Errorf("get %s: %w", key, err)
		}
		// Never above the hard limit the sandbox was started with.
		lim := syscall.Rlimit{Cur: min(uint64(v), cur.Max), Max: min(uint64(v), cur.Max)}
		// syscall.Setrlimit, so the runtime forgets the soft NOFILE it
		// would otherwise restore in children.
		if err := syscall.Setrlimit(res, &lim); err != nil {
			return fmt.Errorf("set %s to %d: %w", key, v, err)
		}
		out[key] = "enforced"
		return nil
	}
	if err := set("rlimit_core", unix.RLIMIT_CORE, 0); err != nil {
		return nil, err
	}
	if err := set("rlimit_fsize", unix.RLIMIT_FSIZE, c.FileSize); err != nil {
		return nil, err
	}
	if err := set("rlimit_nofile", unix.RLIMIT_NOFILE, c.OpenFiles); err != nil {
		return nil, err
	}
	if c.Nproc > 0 {
		if err := set("rlimit_nproc", unix.RLIMIT_NPROC, c.Nproc); err != nil {
			return nil, err
		}
	} else {
		out["rlimit_nproc"] = "unavailable: as root the count is shared with every host root process; the pids cgroup bounds processes instead"
	}
	return out, nil
}

// confine restricts pid 1, every thread of it (all share one address
// space, so a thread left unconfined would be the agent's way out through
// any write into its memory, and the runner works on any of them): no
// capabilities (the bounding set and the ambient ones are gone already,
// and no_new_privs is set, see package execpriv; now none effective or
// permitted either), Landlock when the kernel has it, then seccomp
// (TSYNC). Threads the runtime makes later are cloned from confined ones
// and inherit all of it. Every sandboxed process is forked
// from the calling (locked) thread, whose Landlock domain alone also
// scopes signals and abstract sockets (see applyLandlock). Pid 1 is not
// dumpable (initMain), so no process inside can open its memory or
// descriptors either way.
//
// The per-thread calls go through syscall.AllThreadsSyscall, which needs
// a binary without cgo (agentrun is built with CGO_ENABLED=0); with cgo
// confine fails instead of leaving threads unconfined.
func confine(c *config, mk *marks) (map[string]string, error) {
	out := map[string]string{}
	out["no_new_privs"] = "enforced" // since execpriv's package init
	if abi := landlockABI(); abi > 0 {
		pol := landlockPolicy{
			ReadWrite: []string{WorkDir, "/tmp", homeDir, "/dev/shm"},
			Devices:   []string{"/dev"},
		}
		if c.ProxySocket != "" {
			pol.Ports = append(pol.Ports, proxyPort)
			for _, f := range c.Forwards { // the host's services, tunnelled
				if ap, err := netip.ParseAddrPort(f); err == nil {
					pol.Ports = append(pol.Ports, int(ap.Port()))
				}
			}
		}
		if c.GatewaySocket != "" {
			pol.Ports = append(pol.Ports, gatewayPort)
		}
		pol.AnyTCP = c.LoopbackTCP
		ll, err := applyLandlock(abi, pol)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, ll)
	} else {
		out["landlock"] = "unavailable: " + noLandlock + "; started with the explicit opt-in to run without it"
		out["landlock_net"] = out["landlock"]
	}
	mk.add("init-landlock")
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := allThreads("drop capabilities", unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return nil, err
	}
	out["caps"] = "enforced"
	if err := seccomp.LoadAllThreads(); err != nil {
		return nil, err
	}
	out["seccomp"] = "enforced"
	return out, nil
}

// allThreads makes one system call on every thread of the process; what
// names it in the error.
func allThreads(what string, trap, a1, a2, a3 uintptr) error {
	if _, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3); errno != 0 {
		if errno == syscall.ENOTSUP {
			return fmt.Errorf("%s on every thread: %s: %w", what, execpriv.CgoRefusal, errno)
		}
		return fmt.Errorf("%s on every thread: %w", what, errno)
	}
	return nil
}

// noLandlock says why Landlock is not in force.
const noLandlock = "the kernel has no Landlock (Linux 5.13+ with landlock in the lsm= list)"

// noLandlockEnv opts in to run without Landlock, like
// Options.AllowNoLandlock.
const noLandlockEnv = "AGENTRUN_NATIVE_NO_LANDLOCK"

// allowNoLandlock reports whether the user opted in to run without
// Landlock: by the backend's options or the environment variable (both
// the user's own; nothing a repository can set).
func (b *Backend) allowNoLandlock() bool {
	return b.opts.AllowNoLandlock || os.Getenv(noLandlockEnv) == "1"
}

// landlockRefusal is the catalog error for a kernel without Landlock
// when the user did not opt in (the init's step "landlock"), nil for any
// other error.
func landlockRefusal(err error) error {
	var se *setupError
	if !errors.As(err, &se) || se.Step != stepLandlock {
		return nil
	}
	return refuse("the kernel has no Landlock (Linux 5.13+ with landlock in the lsm= list), so the native sandbox would bound the agent's file access by mounts alone",
		"boot a kernel with Landlock (lsm=...,landlock); to run native without Landlock anyway (namespaces, seccomp and no capabilities still apply), set "+noLandlockEnv+"=1")
}
