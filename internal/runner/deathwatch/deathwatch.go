// Package deathwatch is the runner's watchdog process: the runner's own
// executable started again (the agentrun binary, or a test binary that
// links package runner) with argv[0] Arg0 and Env set. This package's
// init recognises it and runs it to its end.
//
// It is a package of its own, importing only the standard library and
// x/sys, so that Go initializes it among the first packages of the
// binary: the watchdog never runs the inits of the packages it does not
// use (about 160 before package runner's own, 2 of its 2.9 ms start),
// which would take CPU from the command it watches while that command
// starts. It needs no shell nor any other program.
package deathwatch

import (
	"bufio"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Arg0 and Env mark the watchdog process: argv is exactly [Arg0] and Env
// is "1" in its environment.
const (
	Arg0 = "agentrun-runner-watchdog"
	Env  = "AGENTRUN_RUNNER_WATCHDOG"
)

func init() {
	if len(os.Args) == 1 && os.Args[0] == Arg0 && os.Getenv(Env) == "1" {
		os.Exit(Main(os.Stdin))
	}
}

// Main keeps the set of live process groups the runner reports on r
// ("+ PGID [MARKER START]" when one starts, "- PGID" when it is gone) and
// of the markers of commands about to start ("? MARKER START" before the
// start, until the group's "+" line, or "~ MARKER" when it did not
// start) and, when r ends (the runner exited or was killed outright),
// kills every group still in the set and, where markers are known
// (Linux), every process that holds a live group's or an expected
// marker (started no earlier than its START) and their descendants: what
// left the group (setsid, double fork) dies too, and so does a command
// the runner had started but not yet reported when it died.
func Main(r io.Reader) int {
	// Its own group already; a terminal's hangup or interrupt is not the
	// runner's death.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	live, markers := ReadAll(r)
	for pg, m := range live {
		syscall.Kill(-pg, syscall.SIGKILL)
		if m.Link != "" {
			markers[m.Link] = m.Start
		}
	}
	KillHolders(markers, 5*time.Second)
	return 0
}

// Watched is one live group's marker: the pipe its command inherited, as
// /proc/PID/fd shows it, and the command's start time (clock ticks).
type Watched struct {
	Link  string
	Start uint64
}

// Started is the report of group pg starting, with its command's marker
// (none: the zero Watched).
func Started(pg int, m Watched) string {
	if m.Link != "" {
		return "+ " + strconv.Itoa(pg) + " " + m.Link + " " + strconv.FormatUint(m.Start, 10) + "\n"
	}
	return "+ " + strconv.Itoa(pg) + "\n"
}

// Ended is the report of group pg gone.
func Ended(pg int) string { return "- " + strconv.Itoa(pg) + "\n" }

// Expected is the report of a command about to start with marker m (its
// Start: no holder started before it); the command's Started line ends
// the expectation, and so does Dropped.
func Expected(m Watched) string {
	return "? " + m.Link + " " + strconv.FormatUint(m.Start, 10) + "\n"
}

// Dropped is the report that the command expected with marker link did
// not start.
func Dropped(link string) string { return "~ " + link + "\n" }

// Read reads reports until r ends and returns the groups still live.
// Malformed lines are ignored; a line is at most a few hundred bytes.
func Read(r io.Reader) map[int]Watched {
	live, _ := ReadAll(r)
	return live
}

// ReadAll is Read, with the markers still expected (MARKER to START).
func ReadAll(r io.Reader) (map[int]Watched, map[string]uint64) {
	live, expected := map[int]Watched{}, map[string]uint64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 512), 512)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "?":
			if start, err := strconv.ParseUint(f[2], 10, 64); err == nil && strings.HasPrefix(f[1], "pipe:[") {
				expected[f[1]] = start
			}
			continue
		case len(f) == 2 && f[0] == "~":
			delete(expected, f[1])
			continue
		case len(f) != 2 && len(f) != 4:
			continue
		}
		pg, err := strconv.Atoi(f[1])
		if err != nil || pg <= 1 {
			continue
		}
		var w Watched
		if len(f) == 4 {
			start, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil || !strings.HasPrefix(f[2], "pipe:[") {
				continue
			}
			w = Watched{Link: f[2], Start: start}
		}
		switch f[0] {
		case "+":
			live[pg] = w
			delete(expected, w.Link)
		case "-":
			delete(live, pg)
		}
	}
	return live, expected
}
