package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The watchdog is the runner's own executable started again (the agentrun
// binary, or a test binary that links this package) with argv[0]
// watchdogArg0 and watchdogEnv set: init recognises it before anything
// else runs, so it needs no shell nor any other program in the sandbox.
const (
	watchdogArg0 = "agentrun-runner-watchdog"
	watchdogEnv  = "AGENTRUN_RUNNER_WATCHDOG"
)

func init() {
	if len(os.Args) == 1 && os.Args[0] == watchdogArg0 && os.Getenv(watchdogEnv) == "1" {
		os.Exit(watchdogMain(os.Stdin))
	}
}

// watchdogMain keeps the set of live process groups the runner reports on
// r ("+ PGID [MARKER START]" when one starts, "- PGID" when it is gone)
// and, when r ends (the runner exited or was killed outright), kills every
// group still in the set and, where markers are known (Linux), every
// process that holds a live group's marker (started no earlier than its
// command) and their descendants: what left the group (setsid, double
// fork) dies too.
func watchdogMain(r io.Reader) int {
	// Its own group already; a terminal's hangup or interrupt is not the
	// runner's death.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	live := watchdogRead(r)
	markers := map[string]uint64{}
	for pg, m := range live {
		syscall.Kill(-pg, syscall.SIGKILL)
		if m.link != "" {
			markers[m.link] = m.start
		}
	}
	killHolders(markers, 5*time.Second)
	return 0
}

// watched is one live group's marker: the pipe its command inherited, as
// /proc/PID/fd shows it, and the command's start time (clock ticks).
type watched struct {
	link  string
	start uint64
}

// watchdogRead reads reports until r ends and returns the groups still
// live. Malformed lines are ignored; a line is at most a few hundred bytes.
func watchdogRead(r io.Reader) map[int]watched {
	live := map[int]watched{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 512), 512)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 && len(f) != 4 {
			continue
		}
		pg, err := strconv.Atoi(f[1])
		if err != nil || pg <= 1 {
			continue
		}
		var w watched
		if len(f) == 4 {
			start, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil || !strings.HasPrefix(f[2], "pipe:[") {
				continue
			}
			w = watched{link: f[2], start: start}
		}
		switch f[0] {
		case "+":
			live[pg] = w
		case "-":
			delete(live, pg)
		}
	}
	return live
}

// watchdog is a small process outside the runner that ends the command
// groups if the runner dies without ending them itself (SIGKILL, crash).
// Pdeathsig reaches only a command's direct child; the watchdog reaches
// its whole group, on every platform.
type watchdog struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	w    *os.File
	live map[int]watched // groups reported, resent to a restarted watchdog
}

// ready starts the watchdog if it is not running. A command must not start
// without one: it would outlive a runner that dies.
func (d *watchdog) ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ensure()
}

// add reports a started group and its command's marker (none: ""). An
// error means no watchdog covers it (one could not be started again): the
// caller must end the group.
func (d *watchdog) add(pgid int, m watched) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live == nil {
		d.live = map[int]watched{}
	}
	d.live[pgid] = m
	if err := d.ensure(); err != nil {
		delete(d.live, pgid)
		return err
	}
	if err := d.send(pgid, m); err != nil {
		// It died: a new one gets every live group, this one included.
		if err := d.ensure(); err != nil {
			delete(d.live, pgid)
			return err
		}
	}
	return nil
}

// remove reports that a group is gone.
func (d *watchdog) remove(pgid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.live, pgid)
	d.write(fmt.Sprintf("- %d\n", pgid))
}

func (d *watchdog) send(pgid int, m watched) error {
	line := fmt.Sprintf("+ %d\n", pgid)
	if m.link != "" {
		line = fmt.Sprintf("+ %d %s %d\n", pgid, m.link, m.start)
	}
	return d.write(line)
}

func (d *watchdog) write(line string) error {
	if d.w == nil {
		return errors.New("no watchdog")
	}
	if _, err := io.WriteString(d.w, line); err != nil {
		d.stopLocked()
		return err
	}
	return nil
}

// ensure starts the watchdog unless it runs, and reports every live group
// to a new one.
func (d *watchdog) ensure() error {
	if d.w != nil {
		return nil
	}
	if err := d.start(); err != nil {
		return fmt.Errorf("runner watchdog: %w", err)
	}
	for pg, m := range d.live {
		if err := d.send(pg, m); err != nil {
			return fmt.Errorf("runner watchdog: %w", err)
		}
	}
	return nil
}

// selfExe is the running executable: /proc/self/exe on Linux (still the
// same file if the path was replaced or removed since), else its path.
func selfExe() (string, error) {
	if runtime.GOOS == "linux" {
		if _, err := os.Stat("/proc/self/exe"); err == nil {
			return "/proc/self/exe", nil
		}
	}
	return os.Executable()
}

func (d *watchdog) start() error {
	exe, err := selfExe()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path:  exe,
		Args:  []string{watchdogArg0},
		Env:   []string{watchdogEnv + "=1"},
		Dir:   "/",
		Stdin: r,
		// Its own group, no Pdeathsig: it must outlive the runner.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	d.cmd, d.w = cmd, w
	return nil
}

// stopLocked closes the pipe (a watchdog still running then kills the
// groups it knows) and reaps the process.
func (d *watchdog) stopLocked() {
	if d.w != nil {
		d.w.Close()
		d.w = nil
	}
	if d.cmd != nil {
		d.cmd.Wait()
		d.cmd = nil
	}
}

// close ends the watchdog (after the runner has ended every group itself).
func (d *watchdog) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
}
