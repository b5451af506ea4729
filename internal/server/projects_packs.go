package server

// projects_packs.go: a project's packs rolled up as imports add them.
// Every result upload and every new base moves the pack its quarantine
// fetched into the project as it is, and git runs with automatic gc off
// (bundlecheck.Safety). Each git process that reads the project, or a
// quarantine that borrows its objects, opens every pack's index and looks
// for a missing object in each: with a pack per run, each import cost more
// than the one before (a server at 2,700 runs spent 140 ms on a bare
// `cat-file -e`, against 8 ms once its packs were rolled up).

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultPackLimit is how many packs a project may hold before an import
// has them rolled up (Projects.PackLimit zero).
const DefaultPackLimit = 16

// tidyTimeout bounds one roll-up.
const tidyTimeout = 10 * time.Minute

// tidying is the state of the roll-ups in the background.
type tidying struct {
	mu      sync.Mutex
	running map[string]bool // by repository
	stopped bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// packCount is how many packs repo's objects hold (an index each).
func packCount(repo string) int { return len(packs(repo)) }

// packs are the names of the packs repo's objects hold (an index each).
func packs(repo string) map[string]bool {
	ents, err := os.ReadDir(filepath.Join(repo, "objects", "pack"))
	if err != nil {
		return nil
	}
	m := map[string]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "pack-") && strings.HasSuffix(e.Name(), ".idx") {
			m[e.Name()] = true
		}
	}
	return m
}

// mergedAny says whether a pack of before is gone from now.
func mergedAny(now, before map[string]bool) bool {
	for name := range before {
		if !now[name] {
			return true
		}
	}
	return false
}

// tidy has repo's packs rolled up in the background once an import left
// more than PackLimit of them, at most one roll-up per project at a time.
// A roll-up is `git repack --geometric=2 -d`: the small packs merge until
// each is at least twice the size of the next smaller, so a project keeps
// a few packs (about the log of its objects) and an object is rewritten a
// few times in its life. Every object of the packs it merges is kept,
// reachable or not: a pack an import moved in before its ref is written
// loses nothing. Readers at the same time are safe (git looks again for a
// pack that went away). A pack an import adds meanwhile is seen by the
// roll-up's last look, under the lock its import's tidy takes: the
// roll-up goes on until the project is within its limit, or a roll-up
// merges none of the packs it started with (the packs imports added
// meanwhile do not count: they made the project no smaller, while the
// roll-up may well have merged).
func (p *Projects) tidy(repo string) {
	limit := p.PackLimit
	if limit == 0 {
		limit = DefaultPackLimit
	}
	if limit < 0 {
		return
	}
	t := &p.tidying
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.running[repo] || packCount(repo) <= limit {
		return
	}
	if t.running == nil {
		t.running = map[string]bool{}
		t.ctx, t.cancel = context.WithCancel(context.Background())
	}
	t.running[repo] = true
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithTimeout(t.ctx, tidyTimeout)
		defer cancel()
		for {
			before := packs(repo)
			err := p.RollUp(ctx, repo)
			if err != nil && ctx.Err() == nil && p.Log != nil {
				p.Log.Warn("rolling up a project's packs", "repo", repo, "error", err.Error())
			}
			t.mu.Lock()
			if now := packs(repo); err != nil || len(now) <= limit || !mergedAny(now, before) {
				delete(t.running, repo)
				t.mu.Unlock()
				return
			}
			t.mu.Unlock()
		}
	}()
}

// RollUp merges repo's small packs (see tidy), now.
func (p *Projects) RollUp(ctx context.Context, repo string) error {
	_, err := git(ctx, repo, "repack", "--geometric=2", "-d", "-q")
	return err
}

// Stop waits for the roll-ups under way, and none start after; when ctx
// ends first, it stops them (git leaves a repack it did not finish as it
// was: its new pack is renamed in before any old one is removed).
func (p *Projects) Stop(ctx context.Context) error {
	t := &p.tidying
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.mu.Lock()
		if t.cancel != nil {
			t.cancel()
		}
		t.mu.Unlock()
		<-done
		return ctx.Err()
	}
}
