package files

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

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
	ids := s.runIDs()
	recs, errs := s.readAll(ids)
	var runs []*run.Run
	var broken []run.Broken
	for i, id := range ids {
		r, err := recs[i], errs[i]
		if err != nil {
			if errors.Is(err, run.ErrNotFound) {
				continue
			}
			broken = append(broken, run.Broken{ID: id, Err: err.Error()})
			continue
		}
		if !f.Keeps(r) {
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

// readAll reads the records of ids with a few goroutines: reading is file
// system calls plus JSON decoding, and both spread over cores.
func (s *Store) readAll(ids []string) ([]*run.Run, []error) {
	recs := make([]*run.Run, len(ids))
	errs := make([]error, len(ids))
	workers := min(runtime.GOMAXPROCS(0)*2, len(ids)/32+1)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(ids) {
					return
				}
				recs[k], errs[k] = s.read(ids[k])
			}
		}()
	}
	wg.Wait()
	return recs, errs
}
