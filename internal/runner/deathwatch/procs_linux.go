package deathwatch

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Stat is what the runner and its watchdog read of /proc/<pid>/stat.
// Start (clock ticks after boot) tells a pid from a later process that
// reused it.
type Stat struct {
	State      byte
	PPid, Pgrp int
	Start      uint64
}

// ReadStat reads /proc/<pid>/stat; ok is false for an entry that is not a
// live pid's readable stat.
func ReadStat(pid string) (Stat, bool) {
	if pid == "" || pid[0] < '0' || pid[0] > '9' {
		return Stat{}, false
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return Stat{}, false
	}
	// pid (comm) state ppid pgrp ... starttime (field 22) ...; comm may
	// hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return Stat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Stat{}, false
	}
	return Stat{State: f[0][0], PPid: ppid, Pgrp: pgrp, Start: start}, true
}

// Proc is a process seen by Scan. Holder caches whether it holds a marker
// the caller looks for: 0 unknown, 1 it does, -1 it does not.
type Proc struct {
	Stat
	Holder int8
}

// Scan reads the stat of every process.
func Scan() map[int]*Proc {
	out := map[int]*Proc{}
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
		st, ok := ReadStat(n)
		if !ok {
			continue
		}
		out[pid] = &Proc{Stat: st}
	}
	return out
}

// KillHolders is the watchdog's end (the runner died): it kills every
// process holding one of the markers (a pipe link, with the start time of
// the command that inherited it: a holder never started earlier, which
// rules out a later pipe that reused the inode number for any process
// older than the command) and all their descendants, until none is left
// or d has passed. The watchdog is no subreaper: init reaps them.
func KillHolders(markers map[string]uint64, d time.Duration) {
	if len(markers) == 0 {
		return
	}
	self := os.Getpid()
	deadline := time.Now().Add(d)
	sleep := time.Millisecond
	for {
		procs := Scan()
		victims := 0
		for pid, p := range procs {
			if pid == self || p.State == 'Z' {
				continue
			}
			if descendsFromAny(pid, procs, self, markers) {
				unix.Kill(pid, unix.SIGKILL)
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

// descendsFromAny reports whether pid or one of its ancestors holds one of
// the markers and started no earlier than the marker's command.
func descendsFromAny(pid int, procs map[int]*Proc, self int, markers map[string]uint64) bool {
	return DescendsFrom(pid, procs, self, func(pid int, p *Proc) bool {
		link := HeldLink(pid, func(l string) bool { _, ok := markers[l]; return ok })
		return link != "" && p.Start >= markers[link]
	})
}

// DescendsFrom reports whether pid or one of its ancestors below self is
// a holder (holds, asked once per process: Holder caches its answer).
func DescendsFrom(pid int, procs map[int]*Proc, self int, holds func(pid int, p *Proc) bool) bool {
	for depth := 0; pid > 1 && pid != self && depth < 4096; depth++ {
		p := procs[pid]
		if p == nil {
			return false
		}
		if p.Holder == 0 {
			p.Holder = -1
			if holds(pid, p) {
				p.Holder = 1
			}
		}
		if p.Holder == 1 {
			return true
		}
		pid = p.PPid
	}
	return false
}

// HeldLink returns the first of pid's descriptor links that want takes,
// among the descriptors it holds open for writing ("" for none, or a
// process gone). A marker's holder is what holds its write end: the
// runner holds the read end, and so, between its fork and its exec, does
// any other child the runner's process starts (a git process of the
// supervisor), which is no stray. (A pipe's two ends have the same link.)
func HeldLink(pid int, want func(link string) bool) string {
	base := "/proc/" + strconv.Itoa(pid) + "/"
	d, err := os.Open(base + "fd")
	if err != nil {
		return ""
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if l, err := os.Readlink(base + "fd/" + n); err == nil && want(l) && writable(base+"fdinfo/"+n) {
			return l
		}
	}
	return ""
}

// writable reports whether the descriptor whose fdinfo is at path is open
// for writing; one whose fdinfo cannot be read counts as writable (a
// holder is then killed rather than spared).
func writable(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return true
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return err != nil || flags&unix.O_ACCMODE != unix.O_RDONLY
		}
	}
	return true
}
