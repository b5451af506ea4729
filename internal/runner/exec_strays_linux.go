package runner

import (
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentrun/agentrun/internal/runner/deathwatch"
)

// Strays: a command's descendants that leave its process group (setsid,
// double fork) escape the group kill. Every command gets a marker: the
// write end of a pipe as its fd 3, inherited by whatever it forks. When
// the command ends, the runner holds the read end: EOF means no process
// holds the marker any more (the common case, no /proc walk). Otherwise
// it walks /proc for every process holding the marker and their
// descendants, SIGKILLs them by pid and reaps those re-parented to it.
// The runner process is a child subreaper while a command runs, so such
// orphans come back to it rather than to init. A process the runner did
// not start (anything but its commands and their descendants) is never
// signalled nor reaped: they do not hold
// the marker and do not descend from one that does. A descendant that
// closes its inherited descriptors and leaves the group escapes.

// The runner process is a child subreaper only while one of its markers
// is in use: a supervisor that also runs other children (git, another
// backend's sandbox) would otherwise collect their orphans as zombies it
// must not reap.
var (
	subreaperMu    sync.Mutex
	subreaperUsers int
)

func holdSubreaper() {
	subreaperMu.Lock()
	defer subreaperMu.Unlock()
	if subreaperUsers == 0 {
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	subreaperUsers++
}

func releaseSubreaper() {
	subreaperMu.Lock()
	defer subreaperMu.Unlock()
	if subreaperUsers--; subreaperUsers == 0 {
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	}
}

// liveCmds are the pids of commands os/exec is waiting for, across every
// server in the process: never signalled nor reaped here.
var (
	liveMu   sync.Mutex
	liveCmds = map[int]bool{}
	// liveReaped are the reapers to tell when os/exec has reaped a
	// command (see reapPass).
	liveReaped []chan struct{}
)

// forkMu keeps a stray scan from looking at a command between its fork
// and its exec: a forked child holds every descriptor of this process
// until exec closes the close-on-exec ones, another command's marker
// among them, and would be taken for that command's stray (killed, and
// reaped under os/exec's feet). Starts share it; a scan's pass takes it
// alone. startCmd returns only once the exec has happened.
var forkMu sync.RWMutex

// lockForks keeps every fork of the process out while a stray scan
// passes: forkMu for the runner's own commands, and syscall.ForkLock,
// which os/exec holds (for writing) from each fork until the child's
// exec, for every other fork of the process, such as a git process of
// an agent host's supervisor. Such a child forked while a command was
// starting holds that command's marker until its exec (a few
// microseconds, or longer on a busy machine), and a command that ends
// first would take it for its stray. (Children made with a user
// namespace of their own are forked without vfork and exec later; the
// process makes none beside its runner.) It returns the release.
func lockForks() func() {
	forkMu.Lock()
	syscall.ForkLock.RLock()
	return func() {
		syscall.ForkLock.RUnlock()
		forkMu.Unlock()
	}
}

// holdForks is held while a command starts; it returns the release.
func holdForks() func() {
	forkMu.RLock()
	return forkMu.RUnlock
}

func setLive(pid int, live bool) {
	liveMu.Lock()
	defer liveMu.Unlock()
	if live {
		liveCmds[pid] = true
		return
	}
	delete(liveCmds, pid)
	for _, c := range liveReaped {
		select {
		case c <- struct{}{}:
		default: // a pass is due already
		}
	}
}

func isLive(pid int) bool {
	liveMu.Lock()
	defer liveMu.Unlock()
	return liveCmds[pid]
}

// marker is one command's inherited pipe.
type marker struct {
	r, w *os.File
	link string // "pipe:[inode]" as /proc/PID/fd shows it
}

// newMarker returns a marker, or nil if no pipe could be made (the
// command then runs without one).
func newMarker() *marker {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(w.Fd()), &st); err != nil {
		r.Close()
		w.Close()
		return nil
	}
	holdSubreaper()
	return &marker{r: r, w: w, link: "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"}
}

// files are the command's ExtraFiles.
func (m *marker) files() []*os.File {
	if m == nil {
		return nil
	}
	return []*os.File{m.w}
}

// started drops the runner's copy of the write end and records pid as a
// live command.
func (m *marker) started(pid int) {
	setLive(pid, true)
	if m != nil {
		m.w.Close()
	}
}

// waited records that os/exec has reaped the command.
func (m *marker) waited(pid int) { setLive(pid, false) }

// watched is what the watchdog needs to find the command's strays if the
// runner dies: the marker and the start time of the command pid.
func (m *marker) watched(pid int) deathwatch.Watched {
	if m == nil {
		return deathwatch.Watched{}
	}
	st, ok := deathwatch.ReadStat(strconv.Itoa(pid))
	if !ok {
		return deathwatch.Watched{}
	}
	return deathwatch.Watched{Link: m.link, Start: st.Start}
}

// expected is the marker as the watchdog is told of it before the
// command starts, with now as its start: a holder started since is the
// command or descends from it (the pipe is new, and only this process
// hands it on), and this process, which holds the other end, is not.
func (m *marker) expected() deathwatch.Watched {
	if m == nil {
		return deathwatch.Watched{}
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return deathwatch.Watched{}
	}
	// /proc's start times are in USER_HZ (100 a second) since boot.
	return deathwatch.Watched{Link: m.link, Start: uint64(ts.Nano()) / 1e7}
}

// held reports whether some process still holds the write end.
func (m *marker) held() bool {
	m.r.SetReadDeadline(time.Now().Add(time.Millisecond))
	buf := make([]byte, 512)
	for {
		_, err := m.r.Read(buf)
		if err == io.EOF {
			return false
		}
		if err != nil {
			return !errors.Is(err, os.ErrClosed)
		}
	}
}

// killStrays reaps the members of the command's (dead) group pgid that
// were re-parented to the runner, kills every process that holds the
// marker and all their descendants, reaps those re-parented to the
// runner, and closes the marker. It returns once every process it killed
// and every member of the group is gone (reaped by the runner or by a
// parent that was not the runner's), or after d.
//
// A killed process is not a zombie at once: while it exits it holds no
// descriptor (it no longer looks like a holder) and its children are not
// yet re-parented. So the loop does not end when a scan finds nothing to
// kill, only when nothing it killed (same pid and start time) and nothing
// of the group is left; a zombie that was re-parented to the runner late
// is reaped then, not left behind.
func (m *marker) killStrays(pgid int, d time.Duration) {
	if m == nil {
		return
	}
	defer releaseSubreaper()
	m.w.Close() // already closed once the command started
	defer m.r.Close()
	if pgid > 0 {
		reapGroupZombies(pgid)
	}
	held := m.held()
	if !held && (pgid <= 0 || unix.Kill(-pgid, 0) == unix.ESRCH) {
		return // the common case: no /proc walk
	}
	self := os.Getpid()
	killed := map[int]uint64{} // pid -> start time
	deadline := time.Now().Add(d)
	sleep := time.Millisecond
	for {
		if pgid > 0 {
			reapGroupZombies(pgid)
		}
		unlock := lockForks()
		procs := deathwatch.Scan()
		pending := 0
		for pid, p := range procs {
			if pid == self || isLive(pid) {
				continue
			}
			if start, ok := killed[pid]; ok && start == p.Start {
				// Killed: wait for it to go; reap it once it is ours.
				if p.State == 'Z' && p.PPid == self {
					var ws unix.WaitStatus
					unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				}
				pending++
				continue
			}
			if pgid > 0 && p.Pgrp == pgid {
				pending++ // a member of the group, exiting or not yet re-parented
				continue
			}
			if held && descendsFromHolder(pid, procs, self, m.link) {
				killed[pid] = p.Start
				if p.State != 'Z' {
					unix.Kill(pid, unix.SIGKILL)
				} else if p.PPid == self {
					var ws unix.WaitStatus
					unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				}
				pending++
			}
		}
		unlock()
		if pending == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(sleep)
		sleep = min(sleep*2, 20*time.Millisecond)
	}
}

// reapGroupZombies reaps the runner's children in group pgid: members of
// a command's group re-parented to the runner (the command itself has
// been waited for already).
func reapGroupZombies(pgid int) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-pgid, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}

// descendsFromHolder reports whether pid or one of its ancestors (below
// self) holds the marker.
func descendsFromHolder(pid int, procs map[int]*deathwatch.Proc, self int, link string) bool {
	return deathwatch.DescendsFrom(pid, procs, self, func(pid int, _ *deathwatch.Proc) bool {
		return deathwatch.HeldLink(pid, func(l string) bool { return l == link }) != ""
	})
}
