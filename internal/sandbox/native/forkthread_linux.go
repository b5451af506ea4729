package native

import (
	"os"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// forkThread is an OS thread that never exits. Pdeathsig fires when the
// thread that forked the init exits (not the process), and the runtime
// ends a thread whenever a goroutine locked to it returns: forking from
// this thread ties the sandbox to the process, as intended.
var forkThread struct {
	once sync.Once
	reqs chan func()
}

func startOnForkThread(cmd *exec.Cmd) error {
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
	errc := make(chan error, 1)
	forkThread.reqs <- func() { errc <- cmd.Start() }
	return <-errc
}

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
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return
	}
	for i := range data {
		data[i].Inheritable = data[i].Permitted
	}
	if unix.Capset(&hdr, &data[0]) != nil {
		return
	}
	for cp := 0; ; cp++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(cp), 0, 0, 0); err != nil {
			return // EINVAL past the kernel's last capability
		}
	}
}
