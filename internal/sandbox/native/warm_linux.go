package native

// warm_linux.go: an init started ahead of its sandbox (Prewarm). Its start
// (a process in new namespaces, the Go runtime, the package inits, the
// exec-only privileges dropped) is most of a sandbox's start and needs
// nothing of the Spec; a supervisor starts it while the run's workspace
// and servers are made, and Start hands it what it waits for.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
	"golang.org/x/sys/unix"
)

// roleWarm, after roleInit, starts an init that receives its listener and
// its log on its config socket before its config.
const roleWarm = warmstart.RoleWarm

// warm is an init started ahead: the binary it runs, its config socket
// (our end), its status pipe (the read end), when its start's steps
// ended, and the context it lasts for (under ahead.mu).
type warm struct {
	exe string
	*child
	cfgW  *os.File
	stR   *os.File
	marks marks
	owner context.Context
	// cgroups gets the cgroups it joined (joinAhead), once.
	cgroups chan joinedCgroups
}

// ahead is the process's init started ahead, if any: at most one, for
// the next Start of any native Backend of the process (a supervisor
// starts it before it has built the backend that takes it).
var ahead struct {
	mu sync.Mutex
	w  *warm
}

// Prewarm implements sandbox.Prewarmer: it starts an init for the next
// Start of a native backend of this process (one from the same binary),
// in serve mode, which waits for its config, and ends it when ctx ends
// first. If one was started already, it now lasts for ctx instead (a
// ctx that has ended gives it up). It may hold CAP_DAC_OVERRIDE (over
// the user's own files, unprivileged) until it confines itself, whether
// the sandbox has an overlay or not: its config is not known yet. A
// failure is not reported: Start then starts an init as it would have.
func (b *Backend) Prewarm(ctx context.Context) {
	ahead.mu.Lock()
	defer ahead.mu.Unlock()
	if w := ahead.w; w != nil {
		w.owner = ctx
		go w.endWith(ctx)
		return
	}
	if ctx.Err() != nil {
		return
	}
	exe, err := b.executable()
	if err != nil {
		return
	}
	var w *warm
	if in := warmstart.Take(exe); in != nil {
		w = adopt(in) // the supervisor's initializer started it
	} else if w, err = startWarm(exe); err != nil {
		return
	}
	w.owner = ctx
	ahead.w = w
	go w.endWith(ctx)
}

// endWith ends w, unless a Start took it, when ctx ends while w still
// lasts for ctx, or when w's process ended.
func (w *warm) endWith(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-w.done:
	}
	ahead.mu.Lock()
	unused := ahead.w == w && (w.owner == ctx || isDone(w.done))
	if unused {
		ahead.w = nil
	}
	ahead.mu.Unlock()
	if unused {
		w.discard()
	}
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// startWarm starts an init from exe with a config socket and a status
// pipe, and nothing else of a sandbox's.
func startWarm(exe string) (*warm, error) {
	in, err := warmstart.Start(exe)
	if err != nil {
		return nil, fmt.Errorf("start the sandbox init: %w", err)
	}
	return adopt(in), nil
}

// adopt is init in, started ahead (here, or by the initializer of package
// warmstart), waited for from now on, and joining its cgroups.
func adopt(in *warmstart.Init) *warm {
	w := &warm{exe: in.Exe, cfgW: in.CfgW, stR: in.StR,
		marks: marks{{Step: "host-spawn", At: in.Spawn}, {Step: "host-spawned", At: in.Spawned}}}
	w.child = waitFor(in.Proc, func() *os.ProcessState {
		st, _ := in.Proc.Wait()
		return st
	})
	w.cgroups = make(chan joinedCgroups, 1)
	go func(pid int) { w.cgroups <- joinAhead(pid) }(in.Proc.Pid)
	return w
}

// discard ends an init started ahead that no Start took, and removes
// the cgroups it joined.
func (w *warm) discard() {
	w.cfgW.Close()
	w.stR.Close()
	if !isDone(w.done) {
		w.process.Kill()
	}
	<-w.done
	(<-w.cgroups).cg.remove()
}

// takeWarm hands over the process's init started ahead, if it is still
// running and runs exe.
func takeWarm(exe string) *warm {
	ahead.mu.Lock()
	w := ahead.w
	if w == nil || w.exe != exe {
		ahead.mu.Unlock()
		return nil
	}
	ahead.w = nil
	ahead.mu.Unlock()
	if isDone(w.done) {
		w.discard()
		return nil
	}
	if warmTaken != nil {
		warmTaken(w)
	}
	return w
}

// warmTaken, when set (tests), is called with the init takeWarm takes.
var warmTaken func(*warm)

// send gives the init started ahead its listening socket and its log
// (one byte, with both descriptors), before its config: it then serves on
// the listener and takes the log as its stdout and stderr, as an init
// started with them has them.
func (w *warm) send(listener, log *os.File) error {
	rights := unix.UnixRights(int(listener.Fd()), int(log.Fd()))
	if err := unix.Sendmsg(int(w.cfgW.Fd()), []byte{'F'}, rights, nil, 0); err != nil {
		return fmt.Errorf("send the sandbox init its files: %w", err)
	}
	return nil
}

// receiveFiles is the warm init's side of send: it takes the log as its
// stdout and stderr, and returns the listening socket's descriptor.
//
// The listener stays where the kernel put it (close-on-exec, above 2),
// instead of taking listenerFD as an init started with it has it: in an
// init started ahead, the runtime has by now opened its cgroup's CPU
// limit files and keeps them open for the process's life (GOMAXPROCS
// follows them), usually as fds 5 and 6, and a dup onto 5 would have
// replaced one of them with the socket.
func receiveFiles() (int, error) {
	oob := make([]byte, unix.CmsgSpace(2*4))
	buf := make([]byte, 1)
	for {
		n, oobn, _, _, err := unix.Recvmsg(cfgFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("receive files: %w", err)
		}
		if n != 1 || buf[0] != 'F' {
			return 0, errors.New("receive files: the host sent no files")
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return 0, fmt.Errorf("receive files: %d messages: %v", len(msgs), err)
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 2 {
			return 0, fmt.Errorf("receive files: %d descriptors: %v", len(fds), err)
		}
		listener := fds[0]
		if listener <= 2 { // (stdout or stderr was closed) where the log goes
			m, err := unix.FcntlInt(uintptr(listener), unix.F_DUPFD_CLOEXEC, 3)
			if err != nil {
				return 0, fmt.Errorf("receive files: %w", err)
			}
			unix.Close(listener)
			listener = m
		}
		if err := placeFDs(fds[1:], [][]int{{1, 2}}); err != nil {
			return 0, fmt.Errorf("receive files: %w", err)
		}
		return listener, nil
	}
}

// placeFDs makes descriptor fds[i] each of the numbers in to[i] (without
// close-on-exec) and closes it. The kernel gives a received descriptor
// the lowest free number, which may be a target itself (stdout, when
// it was closed): each is first moved above every target, so that
// none is dup'ed onto itself (EINVAL) or replaced by another's dup.
func placeFDs(fds []int, to [][]int) error {
	top := 0
	for _, t := range to {
		top = max(top, slices.Max(t))
	}
	moved := make([]int, 0, len(fds))
	defer func() {
		for _, fd := range moved {
			unix.Close(fd)
		}
	}()
	for _, fd := range fds {
		m, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, top+1)
		if err != nil {
			return err
		}
		unix.Close(fd)
		moved = append(moved, m)
	}
	for i, m := range moved {
		for _, t := range to[i] {
			if err := unix.Dup3(m, t, 0); err != nil {
				return err
			}
		}
	}
	return nil
}
