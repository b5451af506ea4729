package runner

import (
	"context"
	"os"
	"os/signal"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reapOrphans reaps, until ctx ends, the children of this process that no
// one waits for: in a server that is pid 1 of its pid namespace
// (ServerOptions.ReapOrphans), every orphan of the namespace (a command's
// double-forked child, a group member that outlived its leader) is
// re-parented here, and a zombie nobody reaps holds its pid for good. It
// never reaps a command os/exec waits for (liveCmds): that wait would
// fail, and the command's exit status would be lost.
func reapOrphans(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGCHLD)
	defer signal.Stop(sigs)
	reaped := make(chan struct{}, 1)
	liveMu.Lock()
	liveReaped = append(liveReaped, reaped)
	liveMu.Unlock()
	defer func() {
		liveMu.Lock()
		liveReaped = slices.DeleteFunc(liveReaped, func(c chan struct{}) bool { return c == reaped })
		liveMu.Unlock()
	}()
	for {
		reapPass()
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-reaped:
		}
	}
}

// reapPass reaps zombie children until there is none, or the next one
// the kernel shows is a live command: os/exec is about to reap that one,
// and once it has (setLive), the next pass sees past it. forkMu, held
// alone, keeps out a command forked but not yet recorded live (one that
// exits at once would otherwise look like an orphan). Zombies are peeked
// at (WNOWAIT) and reaped by pid.
func reapPass() {
	forkMu.Lock()
	defer forkMu.Unlock()
	for {
		pid, ok := peekZombie()
		if !ok || isLive(pid) || !reapPid(pid) {
			return
		}
	}
}

// siginfoPidOff is where si_pid is in a siginfo_t: after three ints, at
// the union's alignment (that of a pointer).
var siginfoPidOff = (3*unsafe.Sizeof(int32(0)) + unsafe.Sizeof(uintptr(0)) - 1) &^ (unsafe.Sizeof(uintptr(0)) - 1)

// peekZombie returns the pid of a zombie child without reaping it.
func peekZombie() (int, bool) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, false // ECHILD: no child at all
		}
		pid := int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), siginfoPidOff)))
		return pid, pid > 0
	}
}

// reapPid reaps the zombie pid and reports whether it did.
func reapPid(pid int) bool {
	var ws unix.WaitStatus
	for {
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != unix.EINTR {
			return err == nil && got == pid
		}
	}
}
