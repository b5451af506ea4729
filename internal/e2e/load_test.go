package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// loadEnv sets the scale of TestTeamLoad: CLIENTSxRUNS (each client
// submits RUNS runs, one after the other), such as 50x1000.
const loadEnv = "AGENTRUN_LOAD"

// loadScale is the scale of TestTeamLoad: small unless loadEnv says.
func loadScale(t *testing.T) (clients, runs int) {
	s := os.Getenv(loadEnv)
	if s == "" {
		return 5, 4
	}
	a, b, ok := strings.Cut(s, "x")
	clients, err1 := strconv.Atoi(a)
	runs, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || clients < 1 || runs < 1 {
		t.Fatalf("%s=%q: want CLIENTSxRUNS, such as 50x1000", loadEnv, s)
	}
	return clients, runs
}

// submitted is one run of the load: its id and when its submit began
// and ended.
type submitted struct {
	id        string
	at, taken time.Time
	name      string // its agent's start file
}

// TestTeamLoad: clients submit runs at once through the API to a team
// server with two agent hosts; the agent is the cheapest there is (it
// notes when it started and writes one file) on the host sandbox, so
// what is measured is the server and the hosts. Every run must end
// succeeded exactly once: one claim, one start of its agent, one export,
// one succeeded state in its journal. It prints runs/s and the p50/p99 of
// a submit, of the wait from the submit's answer (the run queued) to the
// agent's start (with the queue full, mostly the wait for a free slot),
// and of a run (submit to its end). AGENTRUN_LOAD=50x1000 sets the full
// scale; the default is small, for CI.
func TestTeamLoad(t *testing.T) {
	clients, per := loadScale(t)
	for _, tg := range sqltest.Targets {
		t.Run(tg.Name, func(t *testing.T) { teamLoad(t, newTeam(t, tg, 0, loadTTL), clients, per) })
	}
}

// loadTTL is the lease TTL of TestTeamLoad's server: the 2 s of the host
// loss tests would have a host's heartbeats, slowed by the load on a
// small machine, count as its loss (its runs are then claimed again,
// never run twice at once) where the load test measures no loss.
const loadTTL = 30 * time.Second

// loadFixture is what the load test and the dispatch benchmark submit
// with: the directory the agents stamp their starts in, a bundle of the
// repository's HEAD, and a client of the server.
func (tm *team) loadFixture(tb testing.TB) (starts, bundle string, c *client.Client) {
	starts = filepath.Join(tm.e.root, "starts")
	if err := os.MkdirAll(starts, 0o755); err != nil {
		tb.Fatal(err)
	}
	bundle = filepath.Join(tm.e.root, "base.bundle")
	testsupport.Git(tb, tm.e.repo, "bundle", "create", "-q", bundle, "HEAD")
	c, err := client.New(tm.url, "")
	if err != nil {
		tb.Fatal(err)
	}
	return starts, bundle, c
}

func teamLoad(t *testing.T, tm *team, clients, per int) {
	tm.slots = 4
	tm.startHost(tm.url)
	tm.startHost(tm.url)
	starts, bundle, c := tm.loadFixture(t)
	subs := make([][]submitted, clients)
	var wg sync.WaitGroup
	begin := time.Now()
	for ci := range clients {
		wg.Go(func() {
			for i := range per {
				name := fmt.Sprintf("%d-%d", ci, i)
				spec := map[string]any{"task": "Load " + name, "sandbox": "host",
					"agent_cmd": fmt.Sprintf("date +%%s%%N >> %s; echo %s > load.txt", sh(filepath.Join(starts, name)), name)}
				s := submitted{at: time.Now(), name: name}
				out, err := c.Submit(context.Background(), spec, bundle)
				s.taken = time.Now()
				var d struct {
					ID string `json:"id"`
				}
				if err == nil {
					err = json.Unmarshal(out, &d)
				}
				if err != nil || d.ID == "" {
					t.Errorf("submit %s: %v: %s", name, err, out)
					return
				}
				s.id = d.ID
				subs[ci] = append(subs[ci], s)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(subs...)
	if len(all) != clients*per {
		t.Fatalf("%d runs submitted of %d", len(all), clients*per)
	}
	db, err := sqldb.Connect(context.Background(), tm.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	waitQueueDrained(t, db, len(all))
	elapsed := time.Since(begin)
	ends := checkLoad(t, tm, db, all)
	var sub, disp, e2e []time.Duration
	for _, s := range all {
		sub = append(sub, s.taken.Sub(s.at))
		if st := agentStart(t, filepath.Join(starts, s.name)); !st.IsZero() {
			disp = append(disp, st.Sub(s.taken))
		}
		if end, ok := ends[s.id]; ok {
			e2e = append(e2e, end.Sub(s.at))
		}
	}
	t.Logf("load %dx%d on %s: %d runs in %s: %.1f runs/s; submit %s; queued to the agent's start %s; end to end %s",
		clients, per, t.Name(), len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(),
		percentiles(sub), percentiles(disp), percentiles(e2e))
	t.Logf("where a run's time on its host went: %s", phases(t, db))
}

// phases are the p50/p99 of the steps of a run on its host, from its
// claim (host_claims) and its journal: claim to preparing (the claim's
// answer, the base), preparing to running (workspace, sandbox), running
// to exporting (the agent), exporting to succeeded (the export and the
// result's upload and import), succeeded to the claim's end (release).
func phases(t *testing.T, db *sqldb.DB) string {
	t.Helper()
	at := map[string]map[string]time.Time{}
	note := func(id, step string, when time.Time) {
		if at[id] == nil {
			at[id] = map[string]time.Time{}
		}
		if _, ok := at[id][step]; !ok {
			at[id][step] = when
		}
	}
	rows, err := db.Read().Query(`SELECT run_id, claimed_at, ended_at FROM host_claims WHERE ended_at IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var c, e int64
		if err := rows.Scan(&id, &c, &e); err != nil {
			t.Fatal(err)
		}
		note(id, "claimed", time.UnixMicro(c))
		note(id, "released", time.UnixMicro(e))
	}
	rows.Close()
	rows, err = db.Read().Query(`SELECT run_id, doc FROM run_events WHERE type = 'state'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, doc string
		var e run.Event
		if err := rows.Scan(&id, &doc); err != nil || json.Unmarshal([]byte(doc), &e) != nil {
			t.Fatalf("run %s: an event: %v", id, err)
		}
		note(id, string(e.State), e.Time)
	}
	rows.Close()
	steps := []string{"claimed", string(run.StatePreparing), string(run.StateRunning), string(run.StateExporting), string(run.StateSucceeded), "released"}
	var out []string
	for i := 1; i < len(steps); i++ {
		var ds []time.Duration
		for _, m := range at {
			a, ok1 := m[steps[i-1]]
			b, ok2 := m[steps[i]]
			if ok1 && ok2 {
				ds = append(ds, b.Sub(a))
			}
		}
		out = append(out, steps[i-1]+" to "+steps[i]+" "+percentiles(ds))
	}
	return strings.Join(out, "; ")
}

// waitQueueDrained waits until the n runs of the database have ended
// and their hosts have released them.
func waitQueueDrained(t *testing.T, db *sqldb.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(60+n) * time.Second)
	for {
		var total, ended int
		err := db.Read().QueryRow(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN state IN ('succeeded', 'failed', 'cancelled') THEN 1 ELSE 0 END), 0) FROM runs`).Scan(&total, &ended)
		if err != nil {
			t.Fatal(err)
		}
		if total != n {
			t.Fatalf("the server holds %d runs, %d were submitted", total, n)
		}
		// A host releases its run just after the run ended.
		var open int
		if err := db.Read().QueryRow(`SELECT COUNT(*) FROM host_claims WHERE ended_at IS NULL`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if ended == n && open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs ended after the deadline", ended, n)
		}
		// Each look scans the runs: at the full scale, once a second.
		time.Sleep(min(time.Duration(n)*time.Millisecond, time.Second))
	}
}

// checkLoad asserts, from the server's database, that each run of all
// succeeded exactly once: its record, one claim (ended), one export and
// one succeeded state in its journal, and its agent started once. It
// returns when each run's journal says it succeeded.
func checkLoad(t *testing.T, tm *team, db *sqldb.DB, all []submitted) map[string]time.Time {
	t.Helper()
	states := map[string]string{}
	rows, err := db.Read().Query(`SELECT id, state FROM runs`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		states[id] = st
	}
	rows.Close()
	claims := map[string]int{}
	rows, err = db.Read().Query(`SELECT run_id, COUNT(*), COUNT(ended_at) FROM host_claims GROUP BY run_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var n, ended int
		if err := rows.Scan(&id, &n, &ended); err != nil {
			t.Fatal(err)
		}
		claims[id] = n
		if ended != n {
			t.Errorf("run %s: %d of its %d claims never ended", id, n-ended, n)
		}
	}
	rows.Close()
	exports, succeeded := map[string]int{}, map[string]int{}
	ends := map[string]time.Time{}
	rows, err = db.Read().Query(`SELECT run_id, type, doc FROM run_events WHERE type IN ('export', 'state')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, typ, doc string
		if err := rows.Scan(&id, &typ, &doc); err != nil {
			t.Fatal(err)
		}
		if typ == run.EventExport {
			exports[id]++
			continue
		}
		var e run.Event
		if err := json.Unmarshal([]byte(doc), &e); err != nil {
			t.Fatalf("run %s: an event: %v", id, err)
		}
		if e.State == run.StateSucceeded {
			succeeded[id]++
			ends[id] = e.Time
		}
	}
	rows.Close()
	bad := 0
	for _, s := range all {
		lines := 0
		if b, err := os.ReadFile(filepath.Join(tm.e.root, "starts", s.name)); err == nil {
			lines = strings.Count(string(b), "\n")
		}
		if st := states[s.id]; st != "succeeded" || claims[s.id] != 1 || exports[s.id] != 1 || succeeded[s.id] != 1 || lines != 1 {
			bad++
			if bad <= 10 {
				t.Errorf("run %s (%s): %s, %d claims, %d exports, %d succeeded, its agent started %d times",
					s.id, s.name, st, claims[s.id], exports[s.id], succeeded[s.id], lines)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d runs did not succeed exactly once", bad, len(all))
	}
	return ends
}

// agentStart is when the agent whose start file is path started (its
// first line: nanoseconds since the epoch).
func agentStart(t testing.TB, path string) time.Time {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Errorf("%s: %q", path, b)
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// percentiles formats the p50 and p99 of ds, in milliseconds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("p50 %.1f ms p99 %.1f ms", ms(ds[len(ds)/2]), ms(ds[len(ds)*99/100]))
}

// BenchmarkTeamDispatch measures the dispatch latency of a team server,
// one run at a time: from the submit's answer (the run queued) to its
// agent's start, on an agent host (its claim's long poll woken by the
// submit) and on the server's local worker. It reports the p50/p99 of
// that, and the p50 from the submit's start (submit-p50-ms adds the
// submit itself: the bundle fetched into the project).
//
// The agent (sh -c) starts by writing a line into a FIFO the benchmark
// reads: a builtin, no process of its own, so the time taken is when the
// agent's first instruction ran (p50-ms). It then stamps the time with
// date, as the agents of the load tests do: child-p50-ms is that, which
// adds the start of the agent's first child process (date's fork and
// exec: 5-7 ms on a slow machine).
func BenchmarkTeamDispatch(b *testing.B) {
	for _, where := range []string{"host", "local"} {
		for _, tg := range sqltest.Targets {
			b.Run(where+"/"+tg.Name, func(b *testing.B) {
				local := 0
				if where == "local" {
					local = 2
				}
				tm := newTeam(b, tg, local, hostTTL)
				if where == "host" {
					tm.startHost(tm.url)
				}
				benchDispatch(b, tm)
			})
		}
	}
}

func benchDispatch(b *testing.B, tm *team) {
	starts, bundle, c := tm.loadFixture(b)
	var queued, child, total []time.Duration
	n := 0
	for b.Loop() {
		n++
		start := filepath.Join(starts, strconv.Itoa(n))
		first := firstInstruction(b, start+".fifo")
		// As the CLI submits: with the submitter's author (the host reads
		// no git configuration for it), and a change for the branch.
		spec := map[string]any{"task": "Dispatch", "sandbox": "host", "author": "Bench <bench@example.com>",
			"agent_cmd": fmt.Sprintf("echo > %s; date +%%s%%N > %s; echo %d > dispatch.txt", sh(start+".fifo"), sh(start), n)}
		at := time.Now()
		out, err := c.Submit(context.Background(), spec, bundle)
		answered := time.Now()
		var d struct {
			ID string `json:"id"`
		}
		if err == nil {
			err = json.Unmarshal(out, &d)
		}
		if err != nil {
			b.Fatalf("submit: %v: %s", err, out)
		}
		b.StopTimer()
		var st time.Time
		for deadline := time.Now().Add(30 * time.Second); st.IsZero(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("run %s: its agent did not start", d.ID)
			}
			if bs, err := os.ReadFile(start); err == nil && strings.HasSuffix(string(bs), "\n") {
				st = agentStart(b, start)
			}
		}
		var ran time.Time
		select {
		case ran = <-first:
		case <-time.After(10 * time.Second):
			b.Fatalf("run %s: its agent stamped its start but wrote nothing into the FIFO", d.ID)
		}
		queued = append(queued, ran.Sub(answered))
		child = append(child, st.Sub(answered))
		total = append(total, ran.Sub(at))
		// The next run is submitted once this one ended and its host let
		// it go (the release, its workspace and branch removed: tens of
		// milliseconds), so that each dispatch finds an idle host.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			out, err := c.Get(context.Background(), "/v1/runs/"+d.ID, nil)
			var r struct {
				Status string `json:"status"`
			}
			if err == nil && json.Unmarshal(out, &r) == nil && r.Status == "succeeded" {
				break
			}
			if r.Status == "failed" {
				b.Fatalf("run %s failed: %s", d.ID, out)
			}
			if time.Now().After(deadline) {
				b.Fatalf("run %s did not end", d.ID)
			}
		}
		time.Sleep(150 * time.Millisecond)
		b.StartTimer()
	}
	slices.Sort(queued)
	b.ReportMetric(median(queued), "p50-ms")
	b.ReportMetric(float64(queued[len(queued)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(median(child), "child-p50-ms")
	b.ReportMetric(median(total), "submit-p50-ms")
}

// firstInstruction makes a FIFO at path for an agent to write a line
// into first thing, and returns when that line came. The benchmark holds
// the FIFO open for reading and writing, so the agent's open never waits
// for a reader, and the read waits for the agent's line (not for a first
// writer, as a read-only end would not); the FIFO is closed once the
// line came or the benchmark ended.
func firstInstruction(b *testing.B, path string) <-chan time.Time {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	came := make(chan time.Time, 1)
	go func() {
		buf := make([]byte, 1)
		if _, err := f.Read(buf); err == nil {
			came <- time.Now()
		}
		f.Close()
	}()
	return came
}
