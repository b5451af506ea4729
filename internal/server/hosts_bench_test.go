package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/queue/riverq"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/wire"
)

// claimers is how many hosts claim at once in BenchmarkHostClaims.
const claimers = 8

// BenchmarkHostClaims measures how many runs a server hands out per second
// through the claim route (POST /v1/hosts/claim, what 'agentrun worker'
// calls), with b.N runs queued first and several hosts claiming at once;
// each claim takes the run's lease and records it in host_claims, as a
// host's does. It reports claims/s and the p50/p99 of one claim.
func BenchmarkHostClaims(b *testing.B) {
	sqltest.EachBench(b, func(b *testing.B, newURL func(testing.TB) string) {
		ctx := context.Background()
		be, err := wire.OpenServer(ctx, newURL(b), server.BackendOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		data := b.TempDir()
		l := layout.Layout{Home: data}
		home := supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: l, Claimed: true}
		projects := &server.Projects{Dir: filepath.Join(data, "projects")}
		hosts := &server.Hosts{DB: be.HostsDB, Leases: be.HostLeases, Home: home, Projects: projects, TTL: time.Minute, Queue: be.Queue, Log: slog.New(slog.DiscardHandler)}
		ts := httptest.NewServer(server.New(server.Options{Store: be.Store, Projects: projects, Hosts: hosts, Log: slog.New(slog.DiscardHandler)}).Handler())
		defer ts.Close()

		// The queue: b.N copies of one planned run, each with its own id.
		repo, _ := testsupport.Repo(b, map[string]string{"a.txt": "a\n"})
		svc := &submit.Service{Backends: map[string]sandbox.Backend{"host": host.New()}, DefaultBackend: "host", Agents: wire.Agents()}
		planned, _, err := svc.Plan(ctx, submit.Request{Repo: repo, Task: "t", AgentCmd: "true", Sandbox: "host", Attempts: 1, Getenv: os.Getenv})
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			r := *planned
			r.ID = run.NewID()
			if err := supervisor.Start(ctx, home, &r, supervisor.StartOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		// The queue sweeps the runs in at its start, as a server's does.
		if err := hosts.StartQueue(ctx); err != nil {
			b.Fatal(err)
		}
		// What is measured is the claims, not River's start and first
		// fetch: the timer starts once the queue holds the runs.
		for deadline := time.Now().Add(time.Minute); len(be.Queue.Waiting()) < min(b.N, riverq.DefaultWorkers); {
			if time.Now().After(deadline) {
				b.Fatalf("the queue holds %d runs of %d", len(be.Queue.Waiting()), b.N)
			}
			time.Sleep(10 * time.Millisecond)
		}
		creds := make([]string, claimers)
		for i := range creds {
			tok, err := hosts.NewEnrolToken(ctx, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			en, err := hosts.Enrol(ctx, server.EnrolRequest{Token: tok.Token, Name: fmt.Sprintf("h%d", i), Slots: 1024, Backends: []string{"host"}})
			if err != nil {
				b.Fatal(err)
			}
			creds[i] = en.Credential
		}

		var left atomic.Int64
		left.Store(int64(b.N))
		took := make([][]time.Duration, claimers)
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for i, cred := range creds {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					t0 := time.Now()
					if !claimOnce(b, ts.URL, cred) {
						b.Error("a claim found no run with runs queued")
						return
					}
					took[i] = append(took[i], time.Since(t0))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		var all []time.Duration
		for _, t := range took {
			all = append(all, t...)
		}
		reportLatency(b, all)
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "claims/s")
	})
}

// claimOnce claims one run as host cred, waiting a few seconds at most
// (the queue hands out what River has fetched; the first claims wait for
// its first fetch); false if none was handed out.
func claimOnce(b *testing.B, url, cred string) bool {
	body, _ := json.Marshal(server.ClaimRequest{Backends: []string{"host"}, WaitMS: 5000})
	req, _ := http.NewRequest("POST", url+"/v1/hosts/claim", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Error(err)
		return false
	}
	defer resp.Body.Close()
	var c server.Claim
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK {
		b.Errorf("claim: %d %v", resp.StatusCode, err)
		return false
	}
	return c.Run != nil && c.Token > 0
}

// reportLatency reports the p50 and p99 of ds, in milliseconds.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}
