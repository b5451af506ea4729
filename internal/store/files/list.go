package files

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/run"
)

// List returns the matching runs newest first (highest Seq first) and the
// runs whose record cannot be read; see run.Store. A broken run cannot be
// matched against the filter, so every broken run is reported whatever the
// filter. A run deleted while List reads is left out.
func (s *Store) List(ctx context.Context, f run.Filter) ([]*run.Run, []run.Broken, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	repo := ""
	if f.Repo != "" {
		repo = filepath.Clean(f.Repo)
	}
	var runs []*run.Run
	var broken []run.Broken
	for _, id := range s.runIDs() {
		r, err := s.read(id)
		if err != nil {
			if errors.Is(err, run.ErrNotFound) {
				continue
			}
			broken = append(broken, run.Broken{ID: id, Err: err.Error()})
			continue
		}
		if len(f.States) > 0 && !slices.Contains(f.States, r.State) {
			continue
		}
		if repo != "" && filepath.Clean(r.Repo) != repo {
			continue
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b *run.Run) int {
		if a.Seq != b.Seq {
			if a.Seq > b.Seq {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	slices.SortFunc(broken, func(a, b run.Broken) int { return strings.Compare(a.ID, b.ID) })
	return runs, broken, nil
}
