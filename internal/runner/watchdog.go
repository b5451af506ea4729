package runner

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// watchdogScript keeps the set of live process groups the runner reports
// on stdin ("+ PGID" when one starts, "- PGID" when it is gone) and, when
// stdin ends (the runner exited or was killed outright), kills every group
// still in the set. Only the final kill forks.
const watchdogScript = `list=
while read -r op pg; do
  case $pg in ''|*[!0-9]*) continue ;; esac
  case $op in
    +) eval "g_$pg=1"; list="$list $pg" ;;
    -) unset "g_$pg" ;;
  esac
done
for pg in $list; do
  eval "v=\${g_$pg-}"
  if [ -n "$v" ]; then kill -9 -$pg 2>/dev/null; fi
done`

// watchdog is a small shell process outside the runner that ends the
// command groups if the runner dies without ending them itself (SIGKILL,
// crash). Pdeathsig reaches only a command's direct child; the watchdog
// reaches its whole group, on every platform.
type watchdog struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	w      *os.File
	failed bool
}

// add reports a started group, starting the watchdog on first use. A
// watchdog that cannot start is not an error: commands still run, with
// Pdeathsig and the runner's own cleanup.
func (d *watchdog) add(pgid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil && !d.failed {
		d.failed = d.start() != nil
	}
	d.send("+", pgid)
}

// remove reports that a group is gone.
func (d *watchdog) remove(pgid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.send("-", pgid)
}

func (d *watchdog) send(op string, pgid int) {
	if d.w == nil {
		return
	}
	if _, err := fmt.Fprintf(d.w, "%s %d\n", op, pgid); err != nil {
		d.w.Close()
		d.w = nil
	}
}

func (d *watchdog) start() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript)
	cmd.Stdin = r
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	// Its own group, no Pdeathsig: it must outlive the runner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	d.cmd, d.w = cmd, w
	return nil
}

// close ends the watchdog (after the runner has ended every group itself).
func (d *watchdog) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w != nil {
		d.w.Close()
		d.w = nil
	}
	if d.cmd != nil {
		d.cmd.Wait()
		d.cmd = nil
	}
}
