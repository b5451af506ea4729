package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace/overlay"
)

// systemPaths are bound read-only (or recreated as the same symlink, on a
// merged /usr) when they exist on the host.
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcPaths is the curated /etc: what toolchains, TLS and name lookups
// read. passwd, group, hosts and hostname are generated instead.
var etcPaths = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf",
	"crypto-policies", "debian_version", "gai.conf", "gitconfig", "host.conf",
	"inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
	"lsb-release", "mime.types", "nsswitch.conf", "os-release", "perl", "pki",
	"profile", "profile.d", "protocols", "resolv.conf", "services", "ssl",
	"terminfo", "timezone",
	// JVM tools: the JDK's configuration (its conf/ links here: without
	// java.security no JVM starts) and Maven's.
	"java-*-openjdk", "maven",
}

// devNodes are bound from the host's /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// procMasked are made read-only inside the fresh /proc.
var procMasked = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}

// procHidden are covered with /dev/null.
var procHidden = []string{"kcore", "keys", "timer_list", "sched_debug", "kallsyms"}

// reservedTargets may not be replaced by an extra read-only path, nor
// hold one: each is the sandbox's own (what it is, for the refusal).
var reservedTargets = []struct{ path, what string }{
	{"/proc", "its own /proc"}, {"/dev", "its own /dev"}, {WorkDir, "the workspace"}, {homeDir, "the agent's HOME"},
	{innerDir, "agentrun's own directory"}, {"/etc", "its own /etc, made of chosen host files"},
}

// checkReadOnlyTarget refuses extra paths that would cover the sandbox's
// own mounts. A path under /tmp is shown on the sandbox's own /tmp (a
// fresh tmpfs), bound over it (underTmp); /tmp itself is refused.
func checkReadOnlyTarget(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("read-only path %q is not absolute", p)
	}
	c := filepath.Clean(p)
	if c == "/" {
		return fmt.Errorf("read-only path %q would cover the whole root", p)
	}
	if c == "/tmp" {
		return fmt.Errorf("read-only path %q would cover the sandbox's /tmp, its own (a fresh tmpfs): name a path under it instead", p)
	}
	for _, r := range reservedTargets {
		if c == r.path || strings.HasPrefix(c, r.path+"/") || strings.HasPrefix(r.path, c+"/") {
			return fmt.Errorf("read-only path %q overlaps the sandbox's %s (%s)", p, r.path, r.what)
		}
	}
	return nil
}

// underTmp reports whether the read-only path p (clean) lies under /tmp:
// it is bound once the sandbox's own /tmp is mounted.
func underTmp(p string) bool { return strings.HasPrefix(p, "/tmp/") }

// CheckReadOnly implements sandbox.ReadOnlyChecker.
func (b *Backend) CheckReadOnly(p string) error { return checkReadOnlyTarget(p) }

// buildRoot makes the sandbox's root on a tmpfs at c.Root and pivots into
// it. It runs as pid 1 of the new namespaces, before any confinement.
//
// The root tmpfs and /etc's binds on it are made read-only in one
// recursive call once they are all there, rather than one call per bind
// (the binds of host directories are read-only at once, see bind): the
// mount points of what is mounted after it (writable or with attributes
// of its own) are made before it.
func buildRoot(c *config) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	r := c.Root
	if err := unix.Mount("tmpfs", r, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=4m"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	for _, p := range systemPaths {
		if err := systemPath(r, p); err != nil {
			return err
		}
	}
	if err := buildEtc(r, c); err != nil {
		return err
	}
	if err := bindReadOnly(r, c.ReadOnly, false); err != nil {
		return err
	}
	for _, d := range []struct {
		path string
		mode uint32
	}{{WorkDir, 0o755}, {homeDir, 0o755}, {"/tmp", 0o755}, {"/dev", 0o755}, {"/proc", 0o555}} {
		if err := mkdirs(r+d.path, d.mode); err != nil {
			return err
		}
	}
	if err := setattr(r, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, true); err != nil {
		return err
	}
	if err := mountWritable(c, r); err != nil {
		return err
	}
	if err := bindReadOnly(r, c.ReadOnly, true); err != nil {
		return err
	}
	// The agentrun binary and the proxy and gateway sockets are not bound
	// in: a bind would show their host paths in /proc/self/mountinfo. The
	// init holds them as descriptors instead (openServeFiles).
	if err := buildDev(r, sizeOpt(c)); err != nil {
		return err
	}
	if err := buildProc(r); err != nil {
		return err
	}
	return pivot(r)
}

// bindReadOnly binds the read-only paths ro under root r: those under
// /tmp (tmp: after the sandbox's own /tmp is mounted, on it) or the rest.
func bindReadOnly(r string, ro []string, tmp bool) error {
	for _, p := range ro {
		if underTmp(p) != tmp {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("read-only path: %w", err)
		}
		if err := bind(p, r+filepath.Clean(p), !fi.IsDir()); err != nil {
			return err
		}
	}
	return nil
}

// mountWritable mounts what processes inside may write to: the
// workspace, HOME and /tmp.
func mountWritable(c *config, r string) error {
	if err := mountWorkspace(c, r+WorkDir); err != nil {
		return err
	}
	if c.HomeLayers != nil {
		if err := overlay.Mount(*c.HomeLayers, r+homeDir); err != nil {
			return err
		}
	} else if c.Home != "" {
		if err := unix.Mount(c.Home, r+homeDir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", c.Home, err)
		}
		if err := setattr(r+homeDir, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, true); err != nil {
			return err
		}
	} else if err := tmpfs(r+homeDir, "mode=0700,uid="+strconv.Itoa(c.UID)+",gid="+strconv.Itoa(c.GID)+sizeOpt(c)); err != nil {
		return err
	}
	return tmpfs(r+"/tmp", "mode=1777"+sizeOpt(c))
}

// mountWorkspace mounts the workspace at dst: the host directory bound, or
// the overlay of its layers (mounted here, in the sandbox's own mount
// namespace, so nothing is mounted on the host and the mount table names
// no host path of the layers). A probe also writes through the overlay
// what an agent's edits make the kernel write: a copy-up, a whiteout, an
// opaque directory (probeLayers).
func mountWorkspace(c *config, dst string) error {
	if c.Layers == nil {
		if err := unix.Mount(c.Workspace, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", c.Workspace, err)
		}
		return setattr(dst, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, true)
	}
	if err := overlay.Mount(*c.Layers, dst); err != nil {
		return err
	}
	if c.Mode == modeProbe {
		return probeLayers(dst)
	}
	return nil
}

// sizeOpt bounds a tmpfs's bytes and inodes (the kernel defaults are
// half the host's memory and half its pages).
func sizeOpt(c *config) string {
	o := ""
	if c.TmpSize > 0 {
		o += ",size=" + strconv.FormatInt(c.TmpSize, 10)
	}
	if c.TmpInodes > 0 {
		o += ",nr_inodes=" + strconv.FormatInt(c.TmpInodes, 10)
	}
	return o
}

func systemPath(r, p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("read link %s: %w", p, err)
		}
		if err := os.Symlink(target, r+p); err != nil {
			return fmt.Errorf("link %s: %w", p, err)
		}
		return nil
	}
	return bind(p, r+p, false)
}

// systemLink reports where the link p leads when its whole resolution is
// under a bound system path (/usr, /lib, ...): the sandbox then gets the
// same link, to the resolved path, instead of a bind of what it names.
// Tools read such links themselves: a time zone is named by where
// /etc/localtime points (a bound copy of the zone file sends ICU, in Bun
// and Node.js CLIs, through every file of /usr/share/zoneinfo to find its
// name, on each start).
func systemLink(p string) (string, bool) {
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	for _, sp := range systemPaths {
		if strings.HasPrefix(target, sp+"/") {
			return target, true
		}
	}
	return "", false
}

func buildEtc(r string, c *config) error {
	etc := r + "/etc"
	if err := mkdirs(etc, 0o755); err != nil {
		return err
	}
	var names []string
	for _, pattern := range etcPaths {
		// A pattern names the versions installed (java-17-openjdk, ...).
		m, _ := filepath.Glob("/etc/" + pattern)
		for _, p := range m {
			names = append(names, filepath.Base(p))
		}
	}
	for _, name := range names {
		src := "/etc/" + name
		// One Lstat for a plain entry (this is on every sandbox's start);
		// a link is resolved only once it is known to be one.
		fi, err := os.Lstat(src)
		if err != nil {
			continue // absent: nothing to show
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if target, ok := systemLink(src); ok {
				if err := os.Symlink(target, etc+"/"+name); err != nil {
					return fmt.Errorf("link /etc/%s: %w", name, err)
				}
				continue
			}
			if fi, err = os.Stat(src); err != nil {
				continue // a dangling link: nothing to show
			}
		}
		if err := mountBind(src, etc+"/"+name, !fi.IsDir()); err != nil {
			return err
		}
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\n"
	group := "root:x:0:\n"
	if c.UID != 0 {
		passwd += fmt.Sprintf("agent:x:%d:%d:agent:%s:/bin/sh\n", c.UID, c.GID, homeDir)
	} else {
		passwd = "root:x:0:0:root:" + homeDir + ":/bin/sh\n"
	}
	if c.GID != 0 {
		group += fmt.Sprintf("agent:x:%d:\n", c.GID)
	}
	passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group += "nogroup:x:65534:\n"
	files := map[string]string{
		"passwd":   passwd,
		"group":    group,
		"hostname": sandboxHost + "\n",
		"hosts":    "127.0.0.1\tlocalhost " + sandboxHost + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
	}
	for name, data := range files {
		if err := os.WriteFile(etc+"/"+name, []byte(data), 0o644); err != nil {
			return fmt.Errorf("write /etc/%s: %w", name, err)
		}
	}
	return nil
}

func buildDev(r, size string) error {
	d := r + "/dev"
	if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range devNodes {
		if err := touch(d + "/" + n); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, d+"/"+n, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	// The nodes' binds nosuid and noexec (as the tmpfs under them), in one
	// call: nothing else is mounted on /dev yet.
	if err := setattr(d, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, true); err != nil {
		return err
	}
	for _, sub := range []string{"/pts", "/shm"} {
		if err := mkdirs(d+sub, 0o755); err != nil {
			return err
		}
	}
	// devpts is a convenience (terminals for interactive tools); a kernel
	// that refuses it leaves /dev/pts empty.
	if unix.Mount("devpts", d+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") == nil {
		if err := os.Symlink("pts/ptmx", d+"/ptmx"); err != nil {
			return fmt.Errorf("link /dev/ptmx: %w", err)
		}
	}
	if err := tmpfs(d+"/shm", "mode=1777"+size); err != nil {
		return err
	}
	links := map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
	for name, target := range links {
		if err := os.Symlink(target, d+"/"+name); err != nil {
			return fmt.Errorf("link /dev/%s: %w", name, err)
		}
	}
	// /dev holds only mount points and links now: read-only.
	return setattr(d, unix.MOUNT_ATTR_RDONLY, false)
}

func buildProc(r string) error {
	p := r + "/proc"
	if err := unix.Mount("proc", p, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, name := range procMasked {
		q := p + "/" + name
		if _, err := os.Lstat(q); err != nil {
			continue
		}
		if err := unix.Mount(q, q, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /proc/%s: %w", name, err)
		}
		if err := setattr(q, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, true); err != nil {
			return err
		}
	}
	for _, name := range procHidden {
		q := p + "/" + name
		if _, err := os.Lstat(q); err != nil {
			continue
		}
		if err := unix.Mount(r+"/dev/null", q, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("hide /proc/%s: %w", name, err)
		}
	}
	return nil
}

func pivot(r string) error {
	if err := os.Chdir(r); err != nil {
		return fmt.Errorf("enter new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	// The old root is now stacked on "/": detach it.
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return fmt.Errorf("enter /: %w", err)
	}
	return nil
}

// bind mounts src on dst (created in the new root as a file or a
// directory), read-only, nosuid and nodev at once: nothing is ever made
// under it through a bind of a host directory that is still writable.
func bind(src, dst string, file bool) error {
	if err := mountBind(src, dst, file); err != nil {
		return err
	}
	return setattr(dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, true)
}

// mountBind is bind without the attributes, for /etc's entries: buildRoot
// sets them on the whole root at once (nothing is made under them).
func mountBind(src, dst string, file bool) error {
	if file {
		if err := touch(dst); err != nil {
			return err
		}
	} else if err := mkdirs(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}

// setattr adds mount attributes to the mount at p (and below when rec).
func setattr(p string, set uint64, rec bool) error {
	flags := uint(0)
	if rec {
		flags = unix.AT_RECURSIVE
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, p, flags, &unix.MountAttr{Attr_set: set}); err != nil {
		return fmt.Errorf("set mount attributes of %s: %w", p, err)
	}
	return nil
}

func tmpfs(dst, opts string) error {
	if err := mkdirs(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dst, err)
	}
	return nil
}

// touch makes an empty file at p (and its parents) for a bind: one
// system call where p's directory is there already, as for most.
func touch(p string) error {
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	if errors.Is(err, unix.ENOENT) {
		if err := mkdirs(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		fd, err = unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return unix.Close(fd)
}

// mkdirs makes directory p (and its parents), and is content with one
// that is there: one system call where p's parent is there already.
func mkdirs(p string, mode uint32) error {
	err := unix.Mkdir(p, mode)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EEXIST) {
		err = os.MkdirAll(p, os.FileMode(mode))
	}
	if err != nil {
		return fmt.Errorf("make %s: %w", p, err)
	}
	return nil
}

// unprivilegedPortStart is the sysctl of the network namespace that
// opens it (the sandbox's own here, whichever /proc it is opened in).
const unprivilegedPortStart = "/proc/sys/net/ipv4/ip_unprivileged_port_start"

// forwardLowPorts lets the sandbox's unprivileged runner bind the
// lowest forward below 1024 and those above it (a host service on
// 127.0.0.1:80): the sandbox's network namespace, which nothing outside
// shares, starts its unprivileged ports there. Without such a forward
// it changes nothing.
func forwardLowPorts(c *config) error {
	low := sandbox.LowestPrivilegedPort(c.Forwards)
	if low == 0 || c.ProxySocket == "" {
		return nil
	}
	// The sysctl is the host's in the host's namespace: never written
	// there. warmstart.CloneFlags always makes a new one; this checks it against
	// the namespace of the process that started the sandbox.
	if own := netnsInode(); own == 0 || c.HostNetNS == 0 || own == c.HostNetNS {
		return fmt.Errorf("cannot tell the sandbox's network namespace (%d) from the host's (%d): its unprivileged ports are left alone", own, c.HostNetNS)
	}
	if err := os.WriteFile(unprivilegedPortStart, []byte(strconv.Itoa(low)), 0); err != nil {
		return fmt.Errorf("let the forward of port %d be bound inside: %w", low, err)
	}
	return nil
}

// netnsInode is the inode of this process's network namespace, 0 when
// it cannot be read.
func netnsInode() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return 0
	}
	return st.Ino
}

// setupNet brings the loopback interface up and names the host.
func setupNet() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	if err := unix.Sethostname([]byte(sandboxHost)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	return nil
}
