package run

import (
	"context"
	"path/filepath"
	"slices"
)

// Filter selects runs for List. Zero values select everything.
type Filter struct {
	States []State
	Repo   string // absolute repository path
	// Taken leaves out the queued runs no supervisor has taken up
	// (Supervisor nil): those a server's queue holds, which a sweep for
	// runs a dead supervisor left behind has no business decoding.
	Taken bool
}

// Keeps reports whether f lets r through. A store that cannot filter in
// its own query filters with it.
func (f Filter) Keeps(r *Run) bool {
	if len(f.States) > 0 && !slices.Contains(f.States, r.State) {
		return false
	}
	if f.Repo != "" && filepath.Clean(r.Repo) != filepath.Clean(f.Repo) {
		return false
	}
	return !f.Taken || r.State != StateQueued || r.Supervisor != nil
}

// Broken names a run whose record cannot be read. List reports it beside
// the readable runs instead of failing as a whole.
type Broken struct {
	ID  string `json:"id"`
	Err string `json:"error"`
}

// Store is the run store seam. Implementations: store/files (Lite),
// SQL stores later. Every implementation passes store/storetest.
//
// All methods are safe for concurrent use by several goroutines and, for
// stores shared by processes (files, SQL), by several processes.
type Store interface {
	// Create stores a new run. It assigns r.Seq (monotonic), sets Version to 1
	// and CreatedAt/UpdatedAt when zero. ErrExists if the id is taken;
	// ErrBadID if r.ID is not a valid id.
	Create(ctx context.Context, r *Run) error

	// Get returns the run with the full id. ErrNotFound, ErrBadID,
	// ErrCorrupt (wrapped, naming the run).
	Get(ctx context.Context, id string) (*Run, error)

	// Resolve turns a unique prefix into a full id. ErrBadID for a malformed
	// prefix, ErrNotFound, ErrAmbiguous.
	Resolve(ctx context.Context, prefix string) (string, error)

	// List returns the matching runs newest first (highest Seq first), and
	// the runs that could not be read.
	List(ctx context.Context, f Filter) ([]*Run, []Broken, error)

	// Update reads the run, calls fn on a copy, and stores the copy
	// atomically if fn returns nil, incrementing Version and setting
	// UpdatedAt. The read-modify-write is atomic with respect to every other
	// Update/Transition on the same run (across processes). fn's error is
	// returned unchanged and nothing is stored.
	Update(ctx context.Context, id string, fn func(r *Run) error) (*Run, error)

	// Transition is a compare-and-set of the state: if the current state is
	// one of from, it sets State, Reason and msg (and FinishedAt on a
	// terminal state, StartedAt on first leaving queued), appends an
	// EventState to the journal first, and stores the run. Otherwise it
	// returns ErrConflict (wrapped, naming the current state) and changes
	// nothing.
	Transition(ctx context.Context, id string, from []State, to State, reason Reason, msg string) (*Run, error)

	// TransitionWith is Transition that also applies fn (when not nil) to
	// the record in the same atomic write: the facts that ride on a state
	// change (an attempt's end, check results, the export's result) land
	// with it or not at all. fn runs only when the compare-and-set holds;
	// an error from fn is returned unchanged and nothing is stored, not
	// even the state event. The state fields (State, Reason, Message,
	// StartedAt, FinishedAt) are Transition's whatever fn does to them.
	TransitionWith(ctx context.Context, id string, from []State, to State, reason Reason, msg string, fn func(r *Run) error) (*Run, error)

	// AppendEvent appends e to the run's journal, assigning Seq (and Time if
	// zero). Appends are durable and ordered.
	AppendEvent(ctx context.Context, id string, e Event) (Event, error)

	// Events returns the journal entries with Seq > after, in order.
	Events(ctx context.Context, id string, after int64) ([]Event, error)

	// Delete removes the run and everything stored for it. ErrNotFound.
	Delete(ctx context.Context, id string) error
}

// LazyJournal is a Store that also takes an event whose append need not
// be durable when the call returns (a run's progress: its sandbox
// started, an attempt ended): it is in the journal, in order, for every
// reader at once, and made durable with the run's next state event or
// soon after. A process that dies loses none of it; a crash of the
// machine may lose such events of its last moments, never a state.
type LazyJournal interface {
	AppendEventLazy(ctx context.Context, id string, e Event) (Event, error)
}

// JournaledStore is a Store that also journals events in the transaction
// that writes the record (the SQL store): they land with the record or not
// at all, in order, before a transition's state event; one commit instead
// of one per event and one for the record.
type JournaledStore interface {
	Store
	UpdateJournaled(ctx context.Context, id string, events []Event, fn func(r *Run) error) (*Run, error)
	TransitionJournaled(ctx context.Context, id string, events []Event, from []State, to State, reason Reason, msg string, fn func(r *Run) error) (*Run, error)
}
