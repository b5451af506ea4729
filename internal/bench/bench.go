package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
)

// Job is one run of a bench: a fixture, an agent, a repeat.
type Job struct {
	Fixture *Fixture
	Agent   Agent
	Repeat  int
	// Repo and Base are where the run starts (Prepare).
	Repo, Base string
}

// Submitter runs jobs through the normal submit path.
type Submitter interface {
	// Plan validates the job as submit would, creating nothing: the bench
	// checks one job of each agent before it starts any.
	Plan(ctx context.Context, job Job) error
	// Run submits the job, waits for its run to end and returns the run.
	// The error is for a run that could not be submitted or followed
	// (ctx ending is one); a run that ended badly is no error.
	Run(ctx context.Context, job Job) (*run.Run, error)
}

// Bench runs every agent on every fixture, Repeat times, at most Parallel
// at once, and judges each result.
type Bench struct {
	Submitter Submitter
	Scorer    *Scorer
	// Store and Layout are the data directory's (the runs' journals and
	// transcripts).
	Store  run.Store
	Layout layout.Layout
	// Dir is the bench's own directory: the fixtures' repositories.
	Dir      string
	Agents   []Agent
	Fixtures []*Fixture
	Repeat   int
	Parallel int
	// Out gets every result as it is known; Progress (optional) too.
	Out      *Writer
	Progress func(done, total int, r Result)
}

// Run prepares the fixtures' repositories, checks one job of each agent,
// then runs the jobs, fixtures in order, each agent and repeat in turn. It
// returns the results in job order. An error before any run started (a
// fixture's repository, a job submit refuses) is returned as is; a job
// that fails later is a result of status error. When ctx ends, the jobs
// not started are left out.
func (b *Bench) Run(ctx context.Context) ([]Result, error) {
	jobs, err := b.jobs(ctx)
	if err != nil {
		return nil, err
	}
	checked := map[string]bool{}
	for _, j := range jobs {
		if !checked[j.Agent.Label()] {
			checked[j.Agent.Label()] = true
			if err := b.Submitter.Plan(ctx, j); err != nil {
				return nil, err
			}
		}
	}
	results := make([]Result, len(jobs))
	ran := make([]bool, len(jobs))
	var mu sync.Mutex
	done := 0
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(b.Parallel, 1) {
		wg.Go(func() {
			for i := range next {
				res := b.one(ctx, jobs[i])
				if ctx.Err() != nil && res.Status == StatusError {
					continue // stopped, not measured
				}
				_ = b.Out.Add(res)
				mu.Lock()
				results[i], ran[i] = res, true
				done++
				if b.Progress != nil {
					b.Progress(done, len(jobs), res)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	var out []Result
	for i, r := range results {
		if ran[i] {
			out = append(out, r)
		}
	}
	return out, ctx.Err()
}

// jobs prepares each fixture's repository and lists the jobs.
func (b *Bench) jobs(ctx context.Context) ([]Job, error) {
	var jobs []Job
	for _, f := range b.Fixtures {
		repo, base, err := Prepare(ctx, f, filepath.Join(b.Dir, "repos", f.Name))
		if err != nil {
			return nil, err
		}
		for _, a := range b.Agents {
			for n := 1; n <= max(b.Repeat, 1); n++ {
				jobs = append(jobs, Job{Fixture: f, Agent: a, Repeat: n, Repo: repo, Base: base})
			}
		}
	}
	return jobs, nil
}

// one runs a job and judges its result.
func (b *Bench) one(ctx context.Context, j Job) Result {
	res := Result{Fixture: j.Fixture.Name, Agent: j.Agent, Repeat: j.Repeat}
	fail := func(err error) Result {
		res.Status, res.Message = StatusError, err.Error()
		if ce, ok := catalog.As(err); ok {
			res.ErrorCode = ce.Code
		}
		return res
	}
	r, err := b.Submitter.Run(ctx, j)
	if r != nil {
		evs, _ := b.Store.Events(context.WithoutCancel(ctx), r.ID, 0)
		collect(&res, r, evs, b.Layout)
	}
	if err != nil {
		return fail(err)
	}
	st, judge := runStatus(r)
	if !judge {
		res.Status, res.Message = st, runMessage(r)
		return res
	}
	t0 := time.Now()
	sc, err := b.Scorer.Score(ctx, j.Fixture, Target{ID: r.ID, Repo: j.Repo, Base: j.Base, Commit: r.Commit, Backend: r.Sandbox.Backend})
	res.ScoreMS = time.Since(t0).Milliseconds()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fail(err)
		}
		return fail(fmt.Errorf("the result could not be judged: %w", err))
	}
	res.Status, res.Message = sc.Status, sc.Message
	res.Gamed, res.Unexpected, res.Accept = sc.Gamed, sc.Unexpected, sc.Accept
	return res
}

// runMessage says how a run that is not judged ended.
func runMessage(r *run.Run) string {
	s := "the run ended " + string(r.State)
	if r.Reason != "" && string(r.Reason) != string(r.State) {
		s += " (" + string(r.Reason) + ")"
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}
