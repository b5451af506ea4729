// Package files is the Lite run store: one directory per run under
// $AGENTRUN_HOME/runs, run.json replaced atomically (temp, fsync, rename)
// under a flock, events.jsonl append-only.
package files

import (
	"context"
	"errors"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// Store implements run.Store on the file system.
type Store struct {
	L layout.Layout
}

var _ run.Store = (*Store)(nil)

// Open returns the store rooted at home, creating home/runs if needed.
func Open(home string) (*Store, error) { return &Store{L: layout.Layout{Home: home}}, nil }

var errTODO = errors.New("files store: not implemented yet")

func (s *Store) Create(ctx context.Context, r *run.Run) error               { return errTODO }
func (s *Store) Get(ctx context.Context, id string) (*run.Run, error)       { return nil, errTODO }
func (s *Store) Resolve(ctx context.Context, prefix string) (string, error) { return "", errTODO }
func (s *Store) List(ctx context.Context, f run.Filter) ([]*run.Run, []run.Broken, error) {
	return nil, nil, errTODO
}
func (s *Store) Update(ctx context.Context, id string, fn func(*run.Run) error) (*run.Run, error) {
	return nil, errTODO
}
func (s *Store) Transition(ctx context.Context, id string, from []run.State, to run.State, reason run.Reason, msg string) (*run.Run, error) {
	return nil, errTODO
}
func (s *Store) AppendEvent(ctx context.Context, id string, e run.Event) (run.Event, error) {
	return e, errTODO
}
func (s *Store) Events(ctx context.Context, id string, after int64) ([]run.Event, error) {
	return nil, errTODO
}
func (s *Store) Delete(ctx context.Context, id string) error { return errTODO }
