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
)

func setLive(pid int, live bool) {
	liveMu.Lock()
	defer liveMu.Unlock()
	if live {
		liveCmds[pid] = true
	} else {
		delete(liveCmds, pid)
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
// runner, and closes the marker. It gives up after d.
func (m *marker) killStrays(pgid int, d time.Duration) {
	if m == nil {
		return
	}
	defer releaseSubreaper()
	if pgid > 0 {
		reapGroupZombies(pgid)
	}
	m.w.Close() // already closed once the command started
	defer m.r.Close()
	if !m.held() {
		return
	}
	self := os.Getpid()
	killed := map[int]bool{}
	deadline := time.Now().Add(d)
	sleep := time.Millisecond
	for {
		procs := scanProcs()
		victims := 0
		for pid, p := range procs {
			if pid == self || isLive(pid) {
				continue
			}
			if descendsFromHolder(pid, procs, self, m.link) {
				killed[pid] = true
				if p.state != 'Z' {
					unix.Kill(pid, unix.SIGKILL)
					victims++
				}
			}
			// A killed process re-parented to us: ours to reap.
			if p.state == 'Z' && p.ppid == self && killed[pid] {
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				victims++
			}
		}
		if victims == 0 || time.Now().After(deadline) {
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

type procInfo struct {
	ppid   int
	state  byte
	holder int8 // 0 unknown, 1 holds the marker, -1 does not
}

// scanProcs reads the parent and state of every process.
func scanProcs() map[int]*procInfo {
	out := map[int]*procInfo{}
	d, err := os.Open("/proc")
	if err != nil {
		return out
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		state, ppid, _, ok := procStat(n)
		if !ok {
			continue
		}
		out[pid] = &procInfo{ppid: ppid, state: state}
	}
	return out
}

// descendsFromHolder reports whether pid or one of its ancestors (below
// self) holds the marker.
func descendsFromHolder(pid int, procs map[int]*procInfo, self int, link string) bool {
	for depth := 0; pid > 1 && pid != self && depth < 4096; depth++ {
		p := procs[pid]
		if p == nil {
			return false
		}
		if p.holder == 0 {
			p.holder = -1
			if holdsFD(pid, link) {
				p.holder = 1
			}
		}
		if p.holder == 1 {
			return true
		}
		pid = p.ppid
	}
	return false
}

func holdsFD(pid int, link string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if l, err := os.Readlink(dir + n); err == nil && l == link {
			return true
		}
	}
	return false
}
