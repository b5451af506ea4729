package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/bench"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/testsupport"
)

func TestBenchValidate(t *testing.T) {
	given := func(names ...string) func(string) bool {
		return func(n string) bool { return strings.Contains(" "+strings.Join(names, " ")+" ", " "+n+" ") }
	}
	ok := func() *benchOptions {
		return &benchOptions{Agents: []string{"builtin"}, Repeat: 1, Parallel: 1, set: given()}
	}
	if err := ok().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mut  func(o *benchOptions)
		want catalog.Entry
	}{
		{"no agent", func(o *benchOptions) { o.Agents = nil }, catalog.NoAgent},
		{"repeat 0", func(o *benchOptions) { o.Repeat = 0 }, catalog.Usage},
		{"parallel 0", func(o *benchOptions) { o.Parallel = 0 }, catalog.Usage},
		{"attempts 0", func(o *benchOptions) { o.set = given("attempts") }, catalog.BadAttempts},
		{"max-turns 0", func(o *benchOptions) { o.set = given("max-turns") }, catalog.Usage},
		{"timeout", func(o *benchOptions) { o.Timeout = "soon" }, catalog.BadDuration},
		{"fixtures and builtin", func(o *benchOptions) { o.Dirs, o.Builtin = []string{"x"}, true }, catalog.ConflictFlags},
	} {
		o := ok()
		c.mut(o)
		if err := o.Validate(); !catalog.Has(err, c.want) {
			t.Errorf("%s: want %s, got %v", c.name, c.want.Code, err)
		}
	}
	// Each agent runs with each model; the command is one more agent.
	o := &benchOptions{Agents: []string{"builtin", "claude"}, Models: []string{"a", "b"}, AgentCmd: "make fix", ModelServer: "local"}
	var labels []string
	for _, a := range o.agents() {
		labels = append(labels, a.Label())
	}
	if got := strings.Join(labels, " "); got != "builtin/a builtin/b claude/a claude/b command" {
		t.Errorf("agents %s", got)
	}
}

// resultsFile writes a results file of two agents on two fixtures.
func resultsFile(t *testing.T, passB bench.Status) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "results.jsonl")
	a, b := bench.Agent{Agent: "builtin", Model: "qwen3-coder"}, bench.Agent{Agent: "claude"}
	w, err := bench.Create(p, bench.Header{Bench: "b1", Sandbox: "native", Repeat: 2, Parallel: 1, Agents: []bench.Agent{a, b},
		Fixtures: []bench.FixtureInfo{{Name: "t1", Source: "builtin", Digest: "sha256:x"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []bench.Result{
		{Fixture: "t1", Agent: a, Repeat: 1, Status: bench.StatusPassed, Turns: 3, Tokens: bench.Tokens{Total: 1500}, WallMS: 4000},
		{Fixture: "t1", Agent: a, Repeat: 2, Status: bench.StatusGamed, Gamed: []string{"accept.sh"}, Harness: bench.Harness{Nudges: 1}},
		{Fixture: "t2", Agent: a, Repeat: 1, Status: bench.StatusError, Message: "sandbox", ErrorCode: "sandbox_start"},
		{Fixture: "t1", Agent: b, Repeat: 1, Status: passB, CostUSD: 0.12, WallMS: 9000, Accept: &bench.Accept{ExitCode: 1}},
	} {
		if err := w.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBenchSummarizeCompareList(t *testing.T) {
	h := newTestHome(t)
	a, b := resultsFile(t, bench.StatusFailed), resultsFile(t, bench.StatusPassed)
	ok := func(args ...string) string {
		t.Helper()
		code, out, errb := h.exec(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errb)
		}
		return out
	}
	page := filepath.Join(t.TempDir(), "page.html")
	d := validDoc(t, "bench.schema.json", "bench summarize", ok("bench", "summarize", a, "--json", "--html", page))
	if d["html"] != page || d["k"] != float64(2) {
		t.Errorf("summary %v", d)
	}
	if html, err := os.ReadFile(page); err != nil || !strings.Contains(string(html), `data-model="builtin/qwen3-coder"`) {
		t.Errorf("page: %v", err)
	}
	out := ok("bench", "summarize", a)
	for _, want := range []string{"agent/model", "builtin/qwen3-coder", "50%", "1 nudges", "claude", "pass@2", "t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("summarize: no %q in\n%s", want, out)
		}
	}
	var cmp bench.Comparison
	cmpOut := ok("bench", "compare", a, b, "--json")
	validDoc(t, "bench-compare.schema.json", "bench compare", cmpOut)
	if err := json.Unmarshal([]byte(cmpOut), &cmp); err != nil || len(cmp.Models) != 2 || cmp.Models[1].Delta == nil || cmp.Models[1].Delta.PassRate != 1 {
		t.Errorf("compare %v: %s", err, cmpOut)
	}
	if out := ok("bench", "compare", a, b); !strings.Contains(out, "+100%") {
		t.Errorf("compare: no +100%% in\n%s", out)
	}
	lst := validDoc(t, "bench-list.schema.json", "bench list", ok("bench", "list", "--builtin-fixtures", "--json"))
	if fs, _ := lst["fixtures"].([]any); len(fs) < 10 {
		t.Errorf("%d built-in fixtures", len(fs))
	}
	if out := ok("bench", "list", "--builtin-fixtures", "--task", "py-off-by-one"); !strings.Contains(out, "py-off-by-one") || strings.Contains(out, "js-roman") {
		t.Errorf("list --task:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"bench", "summarize", filepath.Join(t.TempDir(), "none"), "--json"}, "bad_results"},
		{[]string{"bench", "compare", a, "--json"}, "usage"},
		{[]string{"bench", "list", "--builtin-fixtures", "--task", "nope", "--json"}, "no_fixtures"},
		{[]string{"bench", "list", "--fixtures", filepath.Join(t.TempDir(), "none"), "--json"}, "bad_fixture"},
		{[]string{"bench", "--builtin-fixtures", "--json"}, "no_agent"},
	} {
		code, out, _ := h.exec(c.args...)
		d := validDoc(t, "error.schema.json", strings.Join(c.args, " "), out)
		if e, _ := d["error"].(map[string]any); code != 2 || e["code"] != c.code {
			t.Errorf("%v: exit %d, want %s: %s", c.args, code, c.code, out)
		}
	}
}

// A fixture of a repository's bench/ may name that repository as its
// own, never another host path.
func TestBenchRepoFixturesStayInTheRepository(t *testing.T) {
	h := newTestHome(t)
	other, _ := testsupport.Repo(t, map[string]string{"x": "x\n"})
	for _, c := range []struct {
		repo string
		ok   bool
	}{{"../..", true}, {"../../sub", true}, {other, false}, {"../../..", false}} {
		dir, _ := testsupport.Repo(t, map[string]string{
			"sub/y": "y\n", "bench/f/task.md": "Do it.\n", "bench/f/accept.sh": "true\n",
			"bench/f/fixture.toml": "repo = " + strconv.Quote(c.repo) + "\n",
		})
		code, out, _ := h.exec("bench", "list", "--repo", dir, "--json")
		if c.ok && (code != 0 || !strings.Contains(out, `"f"`)) || !c.ok && (code != 2 || !strings.Contains(out, "bad_fixture")) {
			t.Errorf("repo = %q: exit %d\n%s", c.repo, code, out)
		}
	}
}
