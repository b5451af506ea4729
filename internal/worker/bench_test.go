package worker_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/wire"
	"github.com/agentrun/agentrun/internal/worker"
)

// BenchmarkDispatch measures how long a queued run waits until the local
// worker claims it (submit to the supervisor's start), one run at a
// time, found by the worker's poll or with a nudge from the submit (as
// the server's does); it reports the p50 and p99 besides the mean.
func BenchmarkDispatch(b *testing.B) {
	for _, nudge := range []bool{false, true} {
		name := "poll"
		if nudge {
			name = "nudge"
		}
		b.Run(name, func(b *testing.B) { benchDispatch(b, nudge) })
	}
}

func benchDispatch(b *testing.B, nudge bool) {
	sqltest.EachBench(b, func(b *testing.B, newURL func(testing.TB) string) {
		ctx := context.Background()
		be, err := wire.OpenServer(ctx, newURL(b), server.BackendOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		l := layout.Layout{Home: b.TempDir()}
		repo, _ := testsupport.Repo(b, map[string]string{"a.txt": "a\n"})
		claimed := make(chan time.Duration, 1)
		var mu sync.Mutex
		var submitted time.Time
		w := &worker.Local{Home: supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: l, Claimed: true},
			Deps: be.SupervisorDeps(l), Slots: 1,
			Claimed: func(*run.Run, time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				claimed <- time.Since(submitted)
			}}
		if err := w.Start(ctx); err != nil {
			b.Fatal(err)
		}
		defer w.Stop(ctx)
		svc := &submit.Service{Backends: map[string]sandbox.Backend{"host": host.New()}, DefaultBackend: "host", Agents: wire.Agents()}
		var took []time.Duration
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			r, _, err := svc.Plan(ctx, submit.Request{Repo: repo, Task: "t", AgentCmd: "true", Sandbox: "host", Attempts: 1, Getenv: os.Getenv})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			mu.Lock()
			submitted = time.Now()
			mu.Unlock()
			if err := supervisor.Start(ctx, w.Home, r, supervisor.StartOptions{}); err != nil {
				b.Fatal(err)
			}
			if nudge {
				w.Nudge()
			}
			took = append(took, <-claimed)
			b.StopTimer()
			for w.Running() > 0 {
				time.Sleep(time.Millisecond)
			}
			b.StartTimer()
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
	})
}
