package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"github.com/agentrun/agentrun/internal/runner/deathwatch"
)

// watchdog is a small process outside the runner (package deathwatch,
// whose init runs it) that ends the command groups if the runner dies
// without ending them itself (SIGKILL, crash). Pdeathsig reaches only a
// command's direct child; the watchdog reaches its whole group, on every
// platform.
//
// A process has one, shared by all its servers (processWatchdog): it is
// started with the first command of any of them and then stays until the
// process exits, when its pipe ends. What it watches is the process's
// death, not a server's: a server that closes has ended its groups itself
// (and reported them gone), and the next server, such as an agent host's
// next run, finds the watchdog running instead of starting another
// process (the agentrun binary again) beside its command. Nobody waits
// for it to exit either: a host sandbox's Stop is done when its groups are.
type watchdog struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	w    *os.File
	live map[int]deathwatch.Watched // groups reported, resent to a restarted watchdog
	// expected are the markers of commands about to start (expect), by
	// link, until their group is reported (add) or they did not start
	// (settle); resent to a restarted watchdog.
	expected map[string]uint64
}

// expect reports that a command with marker m is about to start, before
// its start: should the runner die between the start and add, before
// the group is known, the watchdog still ends whatever holds the
// marker. An error (no watchdog) is add's to report.
func (d *watchdog) expect(m deathwatch.Watched) error {
	if m.Link == "" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.expected == nil {
		d.expected = map[string]uint64{}
	}
	d.expected[m.Link] = m.Start
	if err := d.ensure(); err != nil {
		return err
	}
	if err := d.write(deathwatch.Expected(m)); err != nil {
		return d.ensure() // a new one gets every expected marker
	}
	return nil
}

// settle ends the expectation of marker link: the command did not
// start.
func (d *watchdog) settle(link string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.settleLocked(link)
}

func (d *watchdog) settleLocked(link string) {
	if _, ok := d.expected[link]; !ok {
		return
	}
	delete(d.expected, link)
	d.write(deathwatch.Dropped(link))
}

// ready starts the watchdog if it is not running. A command must not start
// without one: it would outlive a runner that dies.
func (d *watchdog) ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ensure()
}

// add reports a started group and its command's marker (none: ""), and
// ends the expectation of the marker expected (expect) for it. An error
// means no watchdog covers it (one could not be started again): the
// caller must end the group.
func (d *watchdog) add(pgid int, m deathwatch.Watched, expected string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live == nil {
		d.live = map[int]deathwatch.Watched{}
	}
	d.live[pgid] = m
	// The group's line ends the expectation of its marker on the other
	// side too; one it does not carry is dropped once the line is sent.
	delete(d.expected, m.Link)
	defer d.settleLocked(expected)
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
	d.write(deathwatch.Ended(pgid))
}

func (d *watchdog) send(pgid int, m deathwatch.Watched) error {
	return d.write(deathwatch.Started(pgid, m))
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
// and expected marker to a new one.
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
	for link, start := range d.expected {
		if err := d.write(deathwatch.Expected(deathwatch.Watched{Link: link, Start: start})); err != nil {
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
		Args:  []string{deathwatch.Arg0},
		Env:   []string{deathwatch.Env + "=1"},
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

// processWatchdog is the process's one watchdog (see watchdog).
var processWatchdog watchdog
