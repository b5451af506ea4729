package supervisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/supervisor/ahead"
	"golang.org/x/sys/unix"
)

// Pending is a supervisor process started before its run exists, so that
// its start (a process, the Go runtime and the package initializers:
// 60-70 ms on a slow machine) overlaps the submit's own work (reading the
// repository, writing the record). The binary's initializer starts it for
// a Lite submit's command line (package ahead), before the submit's own
// packages are initialized; Prespawn takes that one or starts another. It
// waits on a socket, first for the sandbox backend to start ahead, then
// for its run: the run's id, handoff, lease and log come over it once the
// record is written (Start with StartOptions.Pending). A Pending that is
// never handed a run (the submit failed) is abandoned: the process sees
// the socket close and exits, having touched nothing.
type Pending struct {
	home string
	proc *os.Process
	conn *os.File // our end of the socket pair
	// once: the run goes over (hand) or the supervisor is let go
	// (Abandon), whichever comes first; handed says it was the run, and
	// conn then stays open for Changes until Abandon.
	once        sync.Once
	handed      bool
	closeOnce   sync.Once
	changesOnce sync.Once
	changes     chan struct{}
}

// errPendingGone means the pending supervisor could not take its run (it
// exited before, or was abandoned); Start spawns a new one instead.
var errPendingGone = errors.New("the supervisor started ahead is gone")

// pendingRun is what a pending supervisor receives besides its lease and
// log descriptors.
type pendingRun struct {
	ID          string  `json:"id"`
	MaxParallel int     `json:"max_parallel"`
	Handoff     Handoff `json:"handoff"`
}

// Prespawn starts a supervisor for data directory l that waits for its
// run, or takes the one the binary's initializer started already (package
// ahead) when it is for l and exe. exe is the agentrun binary ("" = this
// process's own). backend, if not "", is the sandbox backend the run will
// likely use: the supervisor starts what that backend can start ahead of
// a sandbox while it waits (sandbox.Prewarmer), and ends it if the run
// uses another.
func Prespawn(l layout.Layout, exe, backend string) (*Pending, error) {
	exe, err := executable(exe)
	if err != nil {
		return nil, err
	}
	s := ahead.Take()
	if s != nil && (s.Home != l.Home || s.Exe != exe || s.Tell(backend) != nil) {
		s.Conn.Close() // it exits, having touched nothing
		s = nil
	}
	if s == nil {
		if s, err = ahead.Spawn(l.Home, exe, backend != "" && ahead.WarmNative(backend)); err == nil {
			if err = s.Tell(backend); err != nil {
				s.Conn.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("start supervisor ahead: %w", err)
		}
	}
	return &Pending{home: l.Home, proc: s.Proc, conn: s.Conn}, nil
}

// Abandon lets the pending supervisor go without a run: it exits. After
// the run was handed over, it stops hearing the run's changes (Changes).
// Safe on nil and twice.
func (p *Pending) Abandon() {
	if p == nil {
		return
	}
	p.once.Do(func() {}) // no run goes over any more
	p.close()
}

func (p *Pending) close() { p.closeOnce.Do(func() { p.conn.Close() }) }

// Changes is news of the run handed to p: a value comes each time the
// supervisor changes the run's state, and the channel is closed when the
// supervisor exits (its end of the socket closes) or p is abandoned, so a
// submit waiting for the run reads the record then instead of at its
// next poll, and polls alone from there on. It is nil (it never fires)
// when p was not handed its run: the wait then only polls.
func (p *Pending) Changes() <-chan struct{} {
	if p == nil || !p.handed {
		return nil
	}
	p.changesOnce.Do(func() {
		p.changes = make(chan struct{}, 1)
		go func() {
			buf := make([]byte, 64)
			for {
				n, err := p.conn.Read(buf)
				if err != nil {
					close(p.changes)
					return
				}
				if n > 0 {
					select {
					case p.changes <- struct{}{}:
					default: // one unread value says as much
					}
				}
			}
		}()
	})
	return p.changes
}

// hand passes run o.ID, its handoff, its lease (released here, as Spawn
// does) and its log to the pending supervisor, and returns its pid.
func (p *Pending) hand(o SpawnOptions) (pid int, err error) {
	if o.Layout.Home != p.home {
		p.Abandon()
		return 0, errPendingGone
	}
	leaseFile, payload, logf, err := handover(o, pendingRun{ID: o.ID, MaxParallel: max(o.MaxParallel, 1), Handoff: o.Handoff})
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	handed := false
	p.once.Do(func() {
		rights := unix.UnixRights(int(leaseFile.Fd()), int(logf.Fd()))
		// The payload fits the socket's buffer: this never waits on the
		// child, and a child that is gone is EPIPE at once. (Not through
		// Fd, which would make the socket blocking again.)
		var n int
		serr := errPendingGone
		if rc, err := p.conn.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				n, serr = unix.SendmsgN(int(fd), payload, rights, nil, unix.MSG_NOSIGNAL)
				if serr == nil {
					// The payload ends here (the child reads it to
					// EOF); the other way stays open.
					serr = unix.Shutdown(int(fd), unix.SHUT_WR)
				}
			})
		}
		handed = serr == nil && n == len(payload)
		if handed {
			// The socket stays ours to hear the run's changes on
			// (Changes) until Abandon.
			p.handed = true
			return
		}
		p.close()
	})
	if !handed {
		return 0, errPendingGone
	}
	o.Lease.Release() // the child holds the lease now
	return p.proc.Pid, nil
}

// receiveRun waits on conn (fd 3 of a pending supervisor) for its run:
// nil when the socket closes first (the submit made no run). It leaves
// conn open.
func receiveRun(conn *os.File) (*pendingRun, *os.File, *os.File, error) {
	buf := make([]byte, maxHandoff+1024)
	oob := make([]byte, unix.CmsgSpace(2*4))
	n, oobn, _, _, err := unix.Recvmsg(int(conn.Fd()), buf, oob, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("receive run: %w", err)
	}
	if n == 0 && oobn == 0 {
		return nil, nil, nil, nil
	}
	fds, err := receivedFDs(oob[:oobn])
	if err != nil {
		return nil, nil, nil, err
	}
	lease, logf := os.NewFile(uintptr(fds[0]), "supervisor.lock"), os.NewFile(uintptr(fds[1]), "supervisor.log")
	// The rest of a payload the stream split, to its end.
	rest, err := io.ReadAll(io.LimitReader(conn, int64(len(buf)-n)))
	if err == nil {
		var pr pendingRun
		if err = json.Unmarshal(append(buf[:n], rest...), &pr); err == nil {
			return &pr, lease, logf, nil
		}
	}
	lease.Close()
	logf.Close()
	return nil, nil, nil, fmt.Errorf("receive run: %w", err)
}

// receivedFDs are the two descriptors of a control message, close-on-exec
// (nothing started from here may inherit the lease).
func receivedFDs(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	var fds []int
	for _, m := range msgs {
		if err != nil {
			break
		}
		var got []int
		got, err = unix.ParseUnixRights(&m)
		fds = append(fds, got...)
	}
	for _, fd := range fds {
		unix.CloseOnExec(fd)
	}
	if err == nil && len(fds) != 2 {
		err = fmt.Errorf("%d descriptors, want 2", len(fds))
	}
	if err != nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("receive run: %w", err)
	}
	return fds, nil
}
