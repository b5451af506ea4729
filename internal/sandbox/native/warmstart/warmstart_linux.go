package warmstart

import (
	"os"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/agentrun/agentrun/internal/sandbox/native/execpriv"
)

// Capabilities (linux/capability.h; package syscall has none of them).
const (
	capDacOverride = 1
	capSetpcap     = 8
	capNetAdmin    = 12
	capSysAdmin    = 21
)

// early is what the initializer started: done is closed once it tried.
var early struct {
	mu    sync.Mutex
	done  chan struct{}
	init  *Init
	taken bool
}

func init() {
	if !Wanted(os.Args) {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	early.done = make(chan struct{})
	// On the fork thread, not here: the initializers go on meanwhile.
	go func() {
		defer close(early.done)
		if in, err := Start(exe); err == nil {
			early.init = in
		}
	}()
}

// Take returns the init the initializer started for binary exe, once,
// having waited for its start; nil when it started none, its start
// failed, it runs another binary (it is ended then) or it was taken or
// dropped already.
func Take(exe string) *Init {
	in := take()
	if in != nil && in.Exe != exe {
		in.End()
		return nil
	}
	return in
}

// Drop ends the init the initializer started, if nobody took it.
func Drop() {
	if in := take(); in != nil {
		in.End()
	}
}

func take() *Init {
	early.mu.Lock()
	defer early.mu.Unlock()
	if early.done == nil || early.taken {
		return nil
	}
	early.taken = true
	<-early.done
	return early.init
}

// End kills and reaps an init that was not handed its sandbox, and
// closes our ends of its descriptors.
func (in *Init) End() {
	in.CfgW.Close()
	in.StR.Close()
	in.Proc.Kill()
	in.Proc.Wait()
}

// Start starts binary exe as an init that waits for its files and config
// (the warm role), on the fork thread: in new namespaces, as this
// process's user, with what it needs to mount an overlay's layers.
func Start(exe string) (_ *Init, err error) {
	fds, err := socketPair()
	if err != nil {
		return nil, err
	}
	cfgW, cfgR := os.NewFile(uintptr(fds[0]), "config"), os.NewFile(uintptr(fds[1]), "config")
	defer cfgR.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		cfgW.Close()
		return nil, err
	}
	defer stW.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		cfgW.Close()
		stR.Close()
		return nil, err
	}
	defer null.Close()
	in := &Init{Exe: exe, CfgW: cfgW, StR: stR, Spawn: execpriv.Now()}
	OnForkThread(func() {
		in.Proc, err = os.StartProcess(exe, []string{"agentrun", execpriv.Entry, execpriv.Role, RoleWarm}, &os.ProcAttr{
			Dir:   "/",
			Env:   []string{"GOMAXPROCS=1"},
			Files: []*os.File{null, null, null, cfgR, stW},
			Sys:   Attr(os.Getuid(), os.Getgid(), true),
		})
	})
	if err != nil {
		cfgW.Close()
		stR.Close()
		return nil, err
	}
	in.Spawned = execpriv.Now()
	return in, nil
}

// CloneFlags are the namespaces an init is started in: a user namespace
// too unless it is started as root.
func CloneFlags() uintptr {
	f := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if os.Getuid() != 0 {
		f |= syscall.CLONE_NEWUSER
	}
	return f
}

// Attr is how an init is started: in its namespaces (CloneFlags), killed
// with the thread that forked it, in a session of its own, and, started
// unprivileged, running as uid and gid inside with the capabilities it
// builds the root with. overlay: unprivileged, it keeps what it needs to
// mount an overlay's layers (see below).
func Attr(uid, gid int, overlay bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Cloneflags: CloneFlags(), Pdeathsig: syscall.SIGKILL, Setsid: true}
	if os.Getuid() != 0 {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// The init runs as the user's own uid inside; these survive its
		// exec so it can build the root. It drops them all before the
		// sandboxed program starts.
		attr.AmbientCaps = []uintptr{capSysAdmin, capNetAdmin, capSetpcap}
		if overlay {
			// An overlay does its work in the layers with the mounter's
			// credentials: the kernel's work directory is mode 0, and
			// only CAP_DAC_OVERRIDE (over the user's own files, in this
			// namespace) lets it write there.
			attr.AmbientCaps = append(attr.AmbientCaps, capDacOverride)
		}
	}
	return attr
}

// forkThread is an OS thread that never exits. Pdeathsig fires when the
// thread that forked the init exits (not the process), and the runtime
// ends a thread whenever a goroutine locked to it returns: forking from
// this thread ties the sandbox to the process, as intended.
var forkThread struct {
	once sync.Once
	reqs chan func()
}

// OnForkThread runs f on the fork thread and returns when it has.
func OnForkThread(f func()) {
	forkThread.once.Do(func() {
		forkThread.reqs = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			if os.Getuid() == 0 {
				emptyBoundingSet()
			}
			for f := range forkThread.reqs {
				f()
			}
		}()
	})
	done := make(chan struct{})
	forkThread.reqs <- func() { f(); close(done) }
	<-done
}

// Not in package syscall.
const (
	linuxCapabilityVersion3 = 0x20080522 // _LINUX_CAPABILITY_VERSION_3
	prCapbsetDrop           = 24         // PR_CAPBSET_DROP
)

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct{ effective, permitted, inheritable uint32 }

// emptyBoundingSet empties this thread's capability bounding set, having
// first made its inheritable set its permitted one, so that the inits it
// forks as root start with an empty bounding set and still every
// capability they need to build the root: root's capabilities after an
// exec are its bounding set and its inheritable set together. The init
// then has no bounding set left to drop, capability by capability, on
// every thread (see package execpriv: each drop there is a round over all
// its threads). Only the thread that forks inits changes: the runtime
// never clones another thread from one a goroutine has locked, and
// nothing else runs on it. Without userns only: a new user namespace
// gives its first process a full bounding set again.
//
// Each step is best effort: what is left, the init drops itself.
func emptyBoundingSet() {
	hdr := capHeader{version: linuxCapabilityVersion3}
	var data [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return
	}
	for i := range data {
		data[i].inheritable = data[i].permitted
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return
	}
	for cp := uintptr(0); ; cp++ {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetDrop, cp, 0); e != 0 {
			return // EINVAL past the kernel's last capability
		}
	}
}

// socketPair is a close-on-exec pair of connected stream sockets.
func socketPair() ([2]int, error) {
	return syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
}
