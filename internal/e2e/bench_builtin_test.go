package e2e

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent/provider/fakemodel"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/store/files"
)

// BenchmarkBuiltinSubmitWait measures `agentrun submit --wait --agent
// builtin` of a scripted 2-turn task (write_file, then finish) against the
// fake model server on loopback, through the real binary, with the host
// and the native backend. Run it with -benchtime 20x: it reports the
// median wall time of a run (ms/run, median) and the harness's own time
// per turn (ms/turn-harness): the attempt's time (journal: attempt started
// to agent exit) minus the time the model server spent answering, divided
// by the turns. The context window is given by flag, so a run makes
// exactly the two chat requests and no model listing.
func BenchmarkBuiltinSubmitWait(b *testing.B) {
	for _, sandbox := range []string{"host", "native"} {
		b.Run(sandbox, func(b *testing.B) {
			e := benchEnv(b, 1)
			// The script: write the file first; once the request carries
			// the tool's result, finish.
			fake := fakemodel.NewFunc(b, "bench-model", func(_ int, body []byte) fakemodel.Reply {
				if bytes.Contains(body, []byte(`"role":"tool"`)) {
					return fakemodel.Calls(fakemodel.Call("finish", map[string]any{"summary": "wrote hello.txt"}))
				}
				return fakemodel.Calls(fakemodel.Call("write_file", map[string]any{"path": "hello.txt", "content": "hello\n"}))
			})
			model := &timedServer{}
			target, err := url.Parse(strings.TrimSuffix(fake.URL, "/v1"))
			if err != nil {
				b.Fatal(err)
			}
			model.proxy = httputil.NewSingleHostReverseProxy(target)
			front := httptest.NewServer(model)
			defer front.Close()
			st, err := files.Open(e.home)
			if err != nil {
				b.Fatal(err)
			}
			vars := append(slices.Clone(e.vars), "OPENAI_API_KEY=sk-bench")
			var walls []time.Duration
			var harness time.Duration
			turns := 0
			b.ResetTimer()
			for b.Loop() {
				served0, requests0 := model.totals()
				t0 := time.Now()
				cmd := exec.Command(e.bin, "submit", "--json", "--sandbox", sandbox, "--agent", "builtin",
					"--model", "bench-model", "--base-url", front.URL+"/v1", "--context-window", "100000",
					"--wait", "write hello.txt")
				cmd.Dir, cmd.Env = e.repo, vars
				out, err := cmd.CombinedOutput()
				walls = append(walls, time.Since(t0))
				if err != nil {
					if strings.Contains(string(out), "sandbox_preflight") {
						b.Skipf("native sandbox unavailable: %s", out)
					}
					b.Fatalf("submit: %v\n%s", err, out)
				}
				served, requests := model.totals()
				if requests-requests0 != 2 {
					b.Fatalf("%d model requests, want 2\n%s", requests-requests0, out)
				}
				attempt := attemptTime(b, st, between(string(out), `"id": "`, `"`))
				harness += attempt - (served - served0)
				turns += requests - requests0
			}
			b.StopTimer()
			b.ReportMetric(median(walls), "ms/run(median)")
			b.ReportMetric(float64(harness.Microseconds())/1000/float64(turns), "ms/turn-harness")
		})
	}
}

// timedServer forwards to the fake model and adds up the time it takes
// to answer.
type timedServer struct {
	proxy    *httputil.ReverseProxy
	mu       sync.Mutex
	served   time.Duration
	requests int
}

func (s *timedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	s.proxy.ServeHTTP(w, r)
	d := time.Since(t0)
	s.mu.Lock()
	s.served += d
	if r.URL.Path == "/v1/chat/completions" {
		s.requests++
	}
	s.mu.Unlock()
}

func (s *timedServer) totals() (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served, s.requests
}

// attemptTime is the time from the journal's "attempt started" to the
// agent's exit in run id.
func attemptTime(b *testing.B, st *files.Store, id string) time.Duration {
	evs, err := st.Events(context.Background(), id, 0)
	if err != nil {
		b.Fatal(err)
	}
	var start, end time.Time
	for _, e := range evs {
		switch e.Type {
		case run.EventAttempt:
			start = e.Time
		case run.EventAgentExit:
			end = e.Time
		}
	}
	if start.IsZero() || end.IsZero() {
		b.Fatalf("run %s: no attempt in the journal", id)
	}
	return end.Sub(start)
}
