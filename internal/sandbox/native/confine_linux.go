package native

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

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

// confine restricts the calling (locked) thread, from which the
// sandboxed program is forked: no capabilities (bounding set emptied),
// no_new_privs, Landlock when the kernel has it, then seccomp.
func confine(c *config) (map[string]string, error) {
	out := map[string]string{}
	last, err := lastCap()
	if err != nil {
		return nil, err
	}
	for cp := 0; cp <= last; cp++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(cp), 0, 0, 0); err != nil {
			return nil, fmt.Errorf("drop capability %d from the bounding set: %w", cp, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("set no_new_privs: %w", err)
	}
	out["no_new_privs"] = "enforced"
	if abi := landlockABI(); abi > 0 {
		pol := landlockPolicy{
			ReadWrite: []string{WorkDir, "/tmp", homeDir, "/dev/shm", stateDir},
			Devices:   []string{"/dev"},
		}
		if c.ProxySocket != "" {
			pol.Ports = append(pol.Ports, proxyPort)
		}
		if c.GatewaySocket != "" {
			pol.Ports = append(pol.Ports, gatewayPort)
		}
		pol.AnyTCP = c.LoopbackTCP
		ll, err := applyLandlock(abi, pol)
		if err != nil {
			return nil, err
		}
		for k, v := range ll {
			out[k] = v
		}
	} else {
		out["landlock"] = "unavailable: the kernel has no Landlock (Linux 5.13+ with landlock in the lsm= list)"
		out["landlock_net"] = out["landlock"]
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return nil, fmt.Errorf("drop capabilities: %w", err)
	}
	out["caps"] = "enforced"
	if err := loadSeccomp(); err != nil {
		return nil, err
	}
	out["seccomp"] = "enforced"
	return out, nil
}

func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("read cap_last_cap: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parse cap_last_cap: %w", err)
	}
	return n, nil
}
