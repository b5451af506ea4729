package loop

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/provider/fakemodel"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/testsupport"
	"github.com/agentrun/agentrun/internal/workspace"
)

// e2eRun is one whole run of the built-in agent: workspace from the base
// commit, host sandbox, the loop against a fake model, change scan and
// export to a branch in the user's repository.
type e2eRun struct {
	repo, base string
	srv        *fakemodel.Server
	hc         *http.Client
}

func (e *e2eRun) do(tb testing.TB, id string) (*agent.Outcome, time.Duration) {
	ctx := context.Background()
	root := tb.TempDir()
	runDir := filepath.Join(root, "run")
	ws, err := workspace.NewCheckout().Create(ctx, e.repo, e.base, filepath.Join(root, "ws"), filepath.Join(runDir, "wsstate"))
	if err != nil {
		tb.Fatal(err)
	}
	rc, workDir := startHost(tb, ws.Dir())
	a, err := New(run.AgentSpec{Name: "builtin", Model: "test-model", BaseURL: e.srv.URL, ContextWindow: 32768},
		Options{Providers: testProviders, Getenv: func(string) string { return "" }, HTTPClient: e.hc, Repo: e.repo, Base: e.base})
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	out, err := a.Attempt(ctx, agent.AttemptInput{Run: &run.Run{ID: id}, N: 1, Prompt: "Add a greeting file", Runner: rc,
		WorkDir: workDir, Dir: filepath.Join(runDir, "attempts", "1"), RunDir: runDir, Output: &bytes.Buffer{}})
	took := time.Since(start)
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := ws.Scan(ctx, workspace.Limits{})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := workspace.Export(ctx, cs, workspace.ExportOptions{Repo: e.repo, Base: e.base, Branch: "agentrun/" + id,
		Message: "agentrun " + id + "\n", AuthorName: "agentrun", AuthorEmail: "agentrun@localhost", PatchPath: filepath.Join(runDir, "result.patch")}); err != nil {
		tb.Fatal(err)
	}
	return out, took
}

func twoTurnScript() func(n int, body []byte) fakemodel.Reply {
	return func(n int, body []byte) fakemodel.Reply {
		if bytes.Count(body, []byte(`"role":"tool"`)) == 0 {
			return calls(call("write_file", map[string]any{"path": "greeting.txt", "content": "hello\n"}))
		}
		return calls(call("finish", map[string]any{"summary": "added greeting.txt"}))
	}
}

func TestEndToEndToBranch(t *testing.T) {
	repo, base := testsupport.Repo(t, map[string]string{"README.md": "demo\n", "AGENTS.md": "Keep files short.\n"})
	e := &e2eRun{repo: repo, base: base, srv: fakemodel.NewFunc(t, "test-model", twoTurnScript())}
	out, _ := e.do(t, "e2e0000001")
	if out.Reason != run.ReasonCompleted || out.Message != "added greeting.txt" {
		t.Fatalf("%+v", out)
	}
	got, err := testsupport.GitCmd(t, repo, "show", "agentrun/e2e0000001:greeting.txt").Output()
	if err != nil || string(got) != "hello\n" {
		t.Fatalf("branch content %q: %v", got, err)
	}
	// The model saw the repository instructions from the base commit.
	if !strings.Contains(string(e.srv.Requests()[0]), "Keep files short.") {
		t.Fatal("AGENTS.md not in the system prompt")
	}
}

// timingTransport measures time spent waiting for the model.
type timingTransport struct {
	mu    sync.Mutex
	spent time.Duration
}

func (tt *timingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		resp.Body = ioNopCloser{&b}
	}
	tt.mu.Lock()
	tt.spent += time.Since(start)
	tt.mu.Unlock()
	return resp, err
}

type ioNopCloser struct{ *bytes.Buffer }

func (ioNopCloser) Close() error { return nil }

// BenchmarkTwoTurnRun: the scripted 2-turn task (write_file, then finish)
// end to end on the host backend (workspace, sandbox, loop, scan, export).
// Reports the median whole-run time and the harness's own time per turn
// (the attempt minus the time waiting for the model). Run with -benchtime=20x.
func BenchmarkTwoTurnRun(b *testing.B) {
	repo, base := testsupport.Repo(b, map[string]string{"README.md": "demo\n"})
	tt := &timingTransport{}
	e := &e2eRun{repo: repo, base: base, srv: fakemodel.NewFunc(nil, "test-model", twoTurnScript()), hc: &http.Client{Transport: tt}}
	defer e.srv.Close()
	var whole, perTurn []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tt.mu.Lock()
		tt.spent = 0
		tt.mu.Unlock()
		start := time.Now()
		out, took := e.do(b, fmt.Sprintf("bench%05d", i))
		whole = append(whole, time.Since(start))
		if out.Reason != run.ReasonCompleted {
			b.Fatalf("%+v", out)
		}
		tt.mu.Lock()
		perTurn = append(perTurn, (took-tt.spent)/time.Duration(out.Usage.Turns))
		tt.mu.Unlock()
	}
	b.StopTimer()
	b.ReportMetric(float64(median(whole).Microseconds())/1000, "ms/run(median)")
	b.ReportMetric(float64(median(perTurn).Microseconds())/1000, "ms/turn-harness(median)")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkTwoTurnAttempt: the same task without the workspace checkout and
// export (host sandbox start, the loop, sandbox destroy): the built-in
// agent's own share of a run.
func BenchmarkTwoTurnAttempt(b *testing.B) {
	repo, base := testsupport.Repo(b, map[string]string{"README.md": "demo\n"})
	tt := &timingTransport{}
	srv := fakemodel.NewFunc(nil, "test-model", twoTurnScript())
	defer srv.Close()
	var whole, perTurn []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tt.mu.Lock()
		tt.spent = 0
		tt.mu.Unlock()
		start := time.Now()
		root := b.TempDir()
		runDir := filepath.Join(root, "run")
		ws := filepath.Join(root, "ws")
		if err := os.Mkdir(ws, 0o755); err != nil {
			b.Fatal(err)
		}
		rc, workDir := startHost(b, ws)
		a, err := New(run.AgentSpec{Name: "builtin", Model: "test-model", BaseURL: srv.URL, ContextWindow: 32768},
			Options{Providers: testProviders, Getenv: func(string) string { return "" }, HTTPClient: &http.Client{Transport: tt}, Repo: repo, Base: base})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		out, err := a.Attempt(context.Background(), agent.AttemptInput{Run: &run.Run{ID: "benchattmp"}, N: 1, Prompt: "Add a greeting file",
			Runner: rc, WorkDir: workDir, Dir: filepath.Join(runDir, "attempts", "1"), RunDir: runDir, Output: &bytes.Buffer{}})
		took := time.Since(t0)
		if err != nil || out.Reason != run.ReasonCompleted {
			b.Fatalf("%v %+v", err, out)
		}
		whole = append(whole, time.Since(start))
		tt.mu.Lock()
		perTurn = append(perTurn, (took-tt.spent)/time.Duration(out.Usage.Turns))
		tt.mu.Unlock()
	}
	b.StopTimer()
	b.ReportMetric(float64(median(whole).Microseconds())/1000, "ms/run(median)")
	b.ReportMetric(float64(median(perTurn).Microseconds())/1000, "ms/turn-harness(median)")
}
