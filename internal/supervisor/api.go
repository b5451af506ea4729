package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// spawnGrace is how long a freshly created queued run (never attempted,
// no supervisor recorded) counts as "being spawned" although nobody holds
// its lock yet: submit creates the run record, then takes the lock.
const spawnGrace = 10 * time.Second

// Reconcile is called by every command that reads a run: if the run is in
// an active state but no live supervisor holds its supervisor.lock, it is
// marked interrupted (compare-and-set; never left "running"). It returns the
// run as it now is. It is cheap when the run is terminal.
func Reconcile(ctx context.Context, st run.Store, l layout.Layout, r *run.Run) (*run.Run, error) {
	if r == nil || !r.State.Active() {
		return r, nil
	}
	f, err := tryLockPath(l.SupervisorLock(r.ID))
	if err != nil {
		return r, fmt.Errorf("reconcile %s: %w", r.ID, err)
	}
	if f == nil {
		return r, nil // a live supervisor holds it
	}
	defer f.Close()
	if r.State == run.StateQueued && r.Supervisor == nil && len(r.Attempts) == 0 &&
		time.Since(r.CreatedAt) < spawnGrace {
		return r, nil // submit is about to start its supervisor
	}
	nr, err := st.Transition(ctx, r.ID, []run.State{r.State}, run.StateInterrupted, run.ReasonInterrupted,
		"the supervisor stopped without finishing the run; resume it with 'agentrun resume "+r.ID+"'")
	if errors.Is(err, run.ErrConflict) {
		// It moved on meanwhile; report it as it is now.
		return st.Get(ctx, r.ID)
	}
	if err != nil {
		return r, fmt.Errorf("reconcile %s: %w", r.ID, err)
	}
	return nr, nil
}
