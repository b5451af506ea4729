package native

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel structs, sized as the oldest ABI that has each field, so
// an older kernel accepts them.
type llRulesetAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

type llPathBeneath struct {
	allowed  uint64
	parentFD int32
}

// llRuleNetPort is LANDLOCK_RULE_NET_PORT.
const llRuleNetPort = 2

type llNetPort struct {
	allowed uint64
	port    uint64
}

const (
	llRead  = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llFSAll = llRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
)

// landlockABI returns the kernel's Landlock ABI version, 0 without it.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// fsAccess is every filesystem right the ABI knows.
func fsAccess(abi int) uint64 {
	a := uint64(llFSAll)
	if abi >= 2 {
		a |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		a |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		a |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return a
}

// landlockPolicy is what the sandboxed program may touch.
type landlockPolicy struct {
	ReadWrite []string // everything beneath
	Devices   []string // read, write and ioctl of device files beneath
	Ports     []int    // the only TCP ports connect may reach (the bridges)
	// AnyTCP leaves TCP connect unrestricted by Landlock (--loopback-tcp):
	// the network namespace, which has only loopback, is then the bound.
	AnyTCP bool
}

// applyLandlock restricts every thread of the process (no_new_privs must
// be set on each): read and execute everywhere in the new root, write
// only beneath ReadWrite; with ABI >= 4 TCP connect only to Ports. With
// ABI >= 6 the calling thread, from which every sandboxed process is
// forked, gets one more layer: no signals or abstract sockets outside its
// domain (see scopeCallingThread). It returns what it enforced.
func applyLandlock(abi int, pol landlockPolicy) (map[string]string, error) {
	handled := fsAccess(abi)
	attr := llRulesetAttr{handledFS: handled}
	size := unsafe.Sizeof(uint64(0))
	out := map[string]string{}
	if abi >= 4 && pol.AnyTCP {
		out["landlock_net"] = "off: --loopback-tcp allows TCP connect to any port of the sandbox's own loopback (the network namespace still has only loopback)"
	} else if abi >= 4 {
		attr.handledNet = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		size = 2 * unsafe.Sizeof(uint64(0))
		out["landlock_net"] = "enforced"
	} else {
		out["landlock_net"] = fmt.Sprintf("unavailable: Landlock ABI %d has no network rules (needs 4)", abi)
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return nil, fmt.Errorf("landlock create ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	addFD := func(p string, dir int, allowed uint64) error {
		var st unix.Stat_t
		if err := unix.Fstat(dir, &st); err != nil {
			return fmt.Errorf("landlock stat %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			// Rights on a file: only those that apply to files.
			allowed &= unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
				unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
		}
		rule := llPathBeneath{allowed: allowed & handled, parentFD: int32(dir)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("landlock rule %s: %w", p, errno)
		}
		return nil
	}
	addPath := func(p string, allowed uint64) error {
		dir, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("landlock open %s: %w", p, err)
		}
		defer unix.Close(dir)
		return addFD(p, dir, allowed)
	}
	if err := addPath("/", llRead); err != nil {
		return nil, err
	}
	for _, p := range pol.ReadWrite {
		if err := addPath(p, handled); err != nil {
			return nil, err
		}
	}
	dev := uint64(llRead | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	for _, p := range pol.Devices {
		if err := addPath(p, dev); err != nil {
			return nil, err
		}
	}
	for _, port := range pol.Ports {
		if abi < 4 || pol.AnyTCP {
			break
		}
		rule := llNetPort{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, llRuleNetPort, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			return nil, fmt.Errorf("landlock port rule: %w", errno)
		}
	}
	// Each thread gets its own domain from the same rules (the kernel
	// has no call that puts all threads in one).
	if err := allThreads("landlock restrict self", unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); err != nil {
		return nil, err
	}
	if abi >= 6 {
		if err := scopeCallingThread(); err != nil {
			return nil, err
		}
	}
	out["landlock"] = "enforced"
	return out, nil
}

// scopeCallingThread adds, on the calling thread alone, a layer that
// handles no access but scopes signals and abstract unix sockets: the
// sandboxed processes, all forked from this thread, share its domain
// (they may signal each other) and can signal nothing outside it. The
// other threads of pid 1 stay without a scope: their domains are
// siblings of this one (one per thread), and a scoped domain may signal
// only into its own, so pid 1 could not end a command from them.
func scopeCallingThread() error {
	attr := llRulesetAttr{scoped: unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock create scope ruleset: %w", errno)
	}
	defer unix.Close(int(fd))
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock restrict self (scope): %w", errno)
	}
	return nil
}
