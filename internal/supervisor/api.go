// Package supervisor executes one run through the seams (workspace, sandbox,
// egress, agent attempts, checks, export), holds the concurrency slots,
// handles cancel, and recovers runs whose supervisor died.
package supervisor

import (
	"context"
	"errors"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// Reconcile is called by every command that reads a run: if the run is in
// an active state but no live supervisor holds its supervisor.lock, it is
// marked interrupted (compare-and-set; never left "running"). It returns the
// run as it now is. It is cheap when the run is terminal.
func Reconcile(ctx context.Context, st run.Store, l layout.Layout, r *run.Run) (*run.Run, error) {
	return r, errors.New("supervisor.Reconcile: not implemented yet")
}
