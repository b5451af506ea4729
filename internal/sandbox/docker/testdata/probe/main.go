// Command probe is the docker sandbox's escape probe: a static program
// (CGO_ENABLED=0) that the probe tests build, copy into a container's
// workspace and run inside, where the test image's busybox cannot make the
// raw calls. Each subcommand attempts one thing and exits 0 only if it
// worked, 1 if it was refused (printing why, with the errno's name), 2 if
// the probe could not even try. The tests run the same subcommand where
// the thing is allowed (on the host, or with a target inside that is
// allowed) to show that it can succeed, so that a refusal means something.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(usage("no subcommand"))
	}
	probes := map[string]func([]string) error{
		"read": readSecret, "write": write, "unlink": unlink, "tcp": dialTCP, "unix": dialUnix,
		"kill": kill, "ptrace": ptrace, "proc": procRead, "exec-caps": execCaps, "caps": caps,
		"mount": mount, "unshare": unshare, "userns": userns, "keyctl": keyctl, "bpf": bpf,
		"fork": fork, "alloc": alloc, "fill": fill, "sleep": sleep, "sys": sys,
	}
	f, ok := probes[os.Args[1]]
	if !ok {
		os.Exit(usage("unknown subcommand " + os.Args[1]))
	}
	err := f(os.Args[2:])
	var u usageError
	switch {
	case err == nil:
		fmt.Println("worked")
		os.Exit(0)
	case errors.As(err, &u):
		os.Exit(usage(string(u)))
	default:
		fmt.Println("refused:", describe(err))
		os.Exit(1)
	}
}

type usageError string

func (u usageError) Error() string { return string(u) }

func usage(why string) int {
	fmt.Fprintln(os.Stderr, "probe:", why)
	return 2
}

// describe adds the errno's name (EPERM, ENOENT) to err, for the tests to
// match on.
func describe(err error) string {
	var en unix.Errno
	if errors.As(err, &en) {
		return fmt.Sprintf("%v (errno=%s)", err, unix.ErrnoName(en))
	}
	return err.Error()
}

// firstWorked runs try on each target; nil as soon as one works, else
// every refusal joined.
func firstWorked(targets []string, try func(string) error) error {
	if len(targets) == 0 {
		return usageError("no targets")
	}
	var errs []error
	for _, t := range targets {
		err := try(t)
		if err == nil {
			fmt.Println("worked on", t)
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", t, err))
	}
	return errors.Join(errs...)
}

// read SECRET PATH...: a file under one of the paths holds SECRET.
func readSecret(args []string) error {
	if len(args) < 2 {
		return usageError("read SECRET PATH...")
	}
	secret := []byte(args[0])
	return firstWorked(args[1:], func(p string) error {
		found := false
		n := 0
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if n++; n > 10000 {
				return filepath.SkipAll
			}
			if d.Type().IsRegular() {
				b, err := os.ReadFile(path)
				if err == nil && bytes.Contains(b, secret) {
					found = true
					return filepath.SkipAll
				}
			}
			return nil
		})
		if found {
			return nil
		}
		if err == nil {
			err = errors.New("no file holds the secret")
		}
		return err
	})
}

// write PATH...: one of the paths can be opened for writing (made if
// missing); nothing is written to it.
func write(args []string) error {
	return firstWorked(args, func(p string) error {
		fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	})
}

// unlink PATH...: one of the paths can be removed, or replaced by a
// rename onto it.
func unlink(args []string) error {
	return firstWorked(args, func(p string) error {
		err := unix.Unlink(p)
		if err == nil {
			return nil
		}
		tmp := filepath.Join(os.TempDir(), "probe-replacement-"+strconv.Itoa(os.Getpid()))
		if werr := os.WriteFile(tmp, []byte("x"), 0o755); werr != nil {
			return fmt.Errorf("unlink: %w", err)
		}
		defer os.Remove(tmp)
		if rerr := unix.Rename(tmp, p); rerr != nil {
			return fmt.Errorf("unlink: %w; rename onto it: %w", err, rerr)
		}
		return nil
	})
}

// tcp ADDR...: a TCP connection to one of the addresses is accepted.
func dialTCP(args []string) error {
	return firstWorked(args, func(a string) error {
		c, err := net.DialTimeout("tcp", a, 3*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// unix PATH...: a connection to one of the unix sockets is accepted (a
// leading @ names an abstract socket).
func dialUnix(args []string) error {
	return firstWorked(args, func(p string) error {
		c, err := net.DialTimeout("unix", p, 3*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// kill PID: signal 0 reaches the process.
func kill(args []string) error {
	if len(args) != 1 {
		return usageError("kill PID")
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return usageError(err.Error())
	}
	return unix.Kill(pid, 0)
}

// ptrace PID|cmd:TEXT|child: the process can be seized as a tracee (the
// tracer's exit lets it go).
func ptrace(args []string) error {
	if len(args) != 1 {
		return usageError("ptrace PID|cmd:TEXT|child")
	}
	runtime.LockOSThread() // the seizing thread is the tracer
	pid, stop, err := findPid(args[0])
	if err != nil {
		return err
	}
	defer stop()
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// proc PID|cmd:TEXT|child ITEM...: one of /proc/PID/ITEM (environ, mem,
// fd, root, cwd) of the process can be read: environ's content, mem
// opened, where a descriptor in fd leads, root and cwd listed. cmd:TEXT is the first other process
// whose command line holds TEXT; child is a dumpable child started for it
// (the control: the same reads of a process that allows them).
func procRead(args []string) error {
	if len(args) < 2 {
		return usageError("proc PID|cmd:TEXT|child ITEM...")
	}
	pid, stop, err := findPid(args[0])
	if err != nil {
		return err
	}
	defer stop()
	fmt.Println("pid", pid)
	return firstWorked(args[1:], func(item string) error {
		p := fmt.Sprintf("/proc/%d/%s", pid, item)
		switch item {
		case "environ":
			b, err := os.ReadFile(p)
			if err == nil && len(b) == 0 {
				return errors.New("read, but empty")
			}
			return err
		case "mem":
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			return f.Close()
		case "fd":
			// Listing the numbers is allowed to the directory's owner;
			// the attack is reaching what they are.
			ents, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if _, err = os.Readlink(filepath.Join(p, e.Name())); err == nil {
					return nil
				}
			}
			if err == nil {
				err = errors.New("no descriptors")
			}
			return err
		case "root", "cwd":
			_, err := os.ReadDir(p)
			return err
		}
		return usageError("unknown item " + item)
	})
}

// findPid is the process target names and what ends it (for a child).
func findPid(target string) (int, func(), error) {
	nothing := func() {}
	switch {
	case target == "child":
		cmd := exec.Command("/proc/self/exe", "sleep", "30")
		cmd.Env = []string{"PROBE_CHILD=1"}
		if err := cmd.Start(); err != nil {
			return 0, nothing, fmt.Errorf("start the child: %w", err)
		}
		time.Sleep(200 * time.Millisecond) // past its exec
		return cmd.Process.Pid, func() { cmd.Process.Kill(); cmd.Wait() }, nil
	case strings.HasPrefix(target, "cmd:"):
		text := strings.TrimPrefix(target, "cmd:")
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return 0, nothing, err
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if strings.Contains(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), text) {
				return pid, nothing, nil
			}
		}
		return 0, nothing, fmt.Errorf("no process runs %q", text)
	}
	pid, err := strconv.Atoi(target)
	if err != nil {
		return 0, nothing, usageError(err.Error())
	}
	return pid, nothing, nil
}

// exec-caps PATH: executing PATH (a setuid copy of this probe, running
// "caps") gives it a capability or another effective uid.
func execCaps(args []string) error {
	if len(args) != 1 {
		return usageError("exec-caps PATH")
	}
	out, err := exec.Command(args[0], "caps").CombinedOutput()
	fmt.Printf("%s", out)
	if err != nil && !bytes.Contains(out, []byte("worked")) {
		return fmt.Errorf("run %s: %w", args[0], err)
	}
	if bytes.Contains(out, []byte("worked")) {
		return nil
	}
	return errors.New("no privilege gained")
}

// caps: this process holds an effective capability or runs with another
// effective uid than its real one.
func caps(args []string) error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	var eff string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			eff = strings.TrimSpace(v)
		}
	}
	fmt.Printf("ruid %d euid %d CapEff %s\n", os.Getuid(), os.Geteuid(), eff)
	if os.Getuid() != os.Geteuid() || strings.Trim(eff, "0") != "" {
		return nil
	}
	return errors.New("no capability and the real uid")
}

// mount DIR: a tmpfs can be mounted on DIR (and is unmounted again).
func mount(args []string) error {
	if len(args) != 1 {
		return usageError("mount DIR")
	}
	if err := os.MkdirAll(args[0], 0o755); err != nil {
		return usageError(err.Error())
	}
	if err := unix.Mount("none", args[0], "tmpfs", 0, "size=1m"); err != nil {
		return err
	}
	return unix.Unmount(args[0], 0)
}

// unshare: this thread can take a mount namespace of its own.
func unshare(args []string) error {
	runtime.LockOSThread() // the thread ends with the process; never reused
	return unix.Unshare(unix.CLONE_NEWNS)
}

// userns: a child can be started in a user namespace of its own (a Go
// process has threads, so it cannot unshare one itself).
func userns(args []string) error {
	cmd := exec.Command("/proc/self/exe", "sleep", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}
	return cmd.Run()
}

// keyctl: this process can join a new session keyring.
func keyctl(args []string) error {
	_, err := unix.KeyctlJoinSessionKeyring("agentrun-probe")
	return err
}

// bpf: a one-entry BPF array map can be made.
func bpf(args []string) error {
	attr := struct{ typ, keySize, valueSize, maxEntries, flags uint32 }{2, 4, 4, 1, 0} // BPF_MAP_TYPE_ARRAY
	fd, _, e := unix.Syscall(unix.SYS_BPF, 0 /* BPF_MAP_CREATE */, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if e != 0 {
		return e
	}
	return unix.Close(int(fd))
}

// fork N: N processes (each a sleep) can run at once.
func fork(args []string) error {
	if len(args) != 1 {
		return usageError("fork N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return usageError(err.Error())
	}
	sleepBin, err := exec.LookPath("sleep")
	if err != nil {
		return usageError(err.Error())
	}
	var procs []*os.Process
	defer func() {
		for _, p := range procs {
			p.Kill()
			p.Wait()
		}
	}()
	for i := 0; i < n; i++ {
		p, err := os.StartProcess(sleepBin, []string{"sleep", "30"}, &os.ProcAttr{})
		if err != nil {
			return fmt.Errorf("started %d of %d: %w", i, n, err)
		}
		procs = append(procs, p)
	}
	fmt.Printf("started %d\n", n)
	return nil
}

// alloc MB: MB mebibytes can be held in memory (every page touched).
func alloc(args []string) error {
	if len(args) != 1 {
		return usageError("alloc MB")
	}
	mb, err := strconv.Atoi(args[0])
	if err != nil {
		return usageError(err.Error())
	}
	var chunks [][]byte
	for i := 0; i < mb; i++ {
		c := make([]byte, 1<<20)
		for j := 0; j < len(c); j += 4096 {
			c[j] = 1
		}
		chunks = append(chunks, c)
	}
	fmt.Printf("allocated %d MiB\n", len(chunks))
	return nil
}

// fill DIR MB: MB mebibytes can be written under DIR, in files of one
// MiB (each below any file size limit: what is probed is DIR's bound).
func fill(args []string) error {
	if len(args) != 2 {
		return usageError("fill DIR MB")
	}
	mb, err := strconv.Atoi(args[1])
	if err != nil {
		return usageError(err.Error())
	}
	dir, err := os.MkdirTemp(args[0], "probe-fill-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	buf := make([]byte, 1<<20)
	for i := 0; i < mb; i++ {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), buf, 0o644); err != nil {
			return fmt.Errorf("after %d MiB: %w", i, err)
		}
	}
	return nil
}

// sleep SECONDS: a target process for the others.
func sleep(args []string) error {
	if len(args) == 1 {
		if d, err := strconv.Atoi(args[0]); err == nil {
			time.Sleep(time.Duration(d) * time.Second)
		}
	}
	return nil
}

// sys NAME: the named privileged call works, made so that it changes
// nothing that outlives the probe (what it makes is closed or removed).
func sys(args []string) error {
	if len(args) != 1 {
		return usageError("sys NAME")
	}
	calls := map[string]func() error{
		"reboot": func() error { // a wrong magic number: refused even where allowed
			err := unix.Reboot(0)
			if errors.Is(err, unix.EINVAL) {
				return nil // it reached the kernel's own check
			}
			return err
		},
		"swapon": func() error {
			_, _, e := unix.Syscall(unix.SYS_SWAPON, uintptr(unsafe.Pointer(bytePtr("/nonexistent-probe"))), 0, 0)
			if e == unix.ENOENT {
				return nil // past the capability check
			}
			return errnoOrNil(e)
		},
		"open_by_handle_at": func() error {
			dirfd := unix.AT_FDCWD
			_, _, e := unix.Syscall(unix.SYS_OPEN_BY_HANDLE_AT, uintptr(dirfd), 0, 0)
			if e == unix.EFAULT {
				return nil // past the capability check
			}
			return errnoOrNil(e)
		},
		"fsopen": func() error { return closeFd(unix.Fsopen("tmpfs", 0)) },
		"open_tree": func() error {
			return closeFd(unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC))
		},
		"chroot": func() error {
			runtime.LockOSThread() // the thread's root changes; it ends with the process
			return unix.Chroot("/")
		},
		"sethostname": func() error {
			h, err := os.Hostname()
			if err != nil {
				return usageError(err.Error())
			}
			return unix.Sethostname([]byte(h)) // the same name: nothing changes
		},
		"mknod": func() error {
			p := filepath.Join(os.TempDir(), "probe-blockdev-"+strconv.Itoa(os.Getpid()))
			if err := unix.Mknod(p, unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))); err != nil {
				return err
			}
			return os.Remove(p)
		},
		"raw_socket":    func() error { return closeFd(unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)) },
		"packet_socket": func() error { return closeFd(unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)) },
		"userfaultfd": func() error {
			fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)
			return closeFd(int(fd), errnoOrNil(e))
		},
		"perf_event_open": func() error {
			attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Bits: unix.PerfBitDisabled}
			attr.Size = uint32(unsafe.Sizeof(attr))
			return closeFd(unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC))
		},
		"io_uring_setup": func() error {
			var params [120]byte // struct io_uring_params
			fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
			return closeFd(int(fd), errnoOrNil(e))
		},
	}
	f, ok := calls[args[0]]
	if !ok {
		return usageError("unknown call " + args[0])
	}
	return f()
}

func bytePtr(s string) *byte {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return p
}

func errnoOrNil(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func closeFd(fd int, err error) error {
	if err != nil {
		return err
	}
	return unix.Close(fd)
}
