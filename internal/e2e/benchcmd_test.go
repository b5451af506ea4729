package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/bench"
	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/modelserver"
)

// benchEdits is what the scripted model writes for each fixture, told
// apart by its task text: the right edit (passed), a wrong one (failed:
// the acceptance refuses it) and an edit of accept.sh that would make any
// result pass (gamed).
var benchEdits = []struct {
	fixture, marker, path, content string
	want                           bench.Status
}{
	{"py-off-by-one", "sum_range(a, b)", "sum_range.py",
		"def sum_range(a, b):\n    \"\"\"Return the sum of the integers from a to b, both included (0 if a > b).\"\"\"\n    return sum(range(a, b + 1))\n", bench.StatusPassed},
	{"sh-add-flag", "greet.sh", "greet.sh", "#!/bin/sh\necho \"Hello, $2!\"\n", bench.StatusFailed},
	{"js-numeric-sort", "sortNumbers", "accept.sh", "#!/bin/sh\nexit 0\n", bench.StatusGamed},
}

// benchScript makes the built-in agent write the fixture's edit, then
// answer.
func benchScript(t modelserver.Turn) modelserver.Reply {
	if t.ToolResults > 0 {
		return modelserver.Reply{Text: "Done."}
	}
	for _, e := range benchEdits {
		if bytes.Contains(t.Body, []byte(e.marker)) {
			if c, ok := modelserver.WriteCall(t.Tools, "", e.path, e.content); ok {
				return modelserver.Reply{Text: "Writing " + e.path + ".", Calls: []modelserver.Call{c}}
			}
		}
	}
	return modelserver.Reply{Text: "I do not know this task."}
}

// The bench in CI: three of our fixtures with the built-in agent against
// the scripted model server, in the native sandbox (required where
// capabilities are): one passes, one fails its acceptance, one is caught
// gaming it. The results file, the summary and the page are checked.
func TestBenchBuiltinAgent(t *testing.T) {
	e := newEnv(t)
	e.scriptedServer(benchScript, "")
	out := filepath.Join(e.root, "results.jsonl")
	args := []string{"bench", "--json", "--agent", "builtin", "--model", "test-model", "--model-server", "scripted",
		"--sandbox", "native", "--parallel", "3", "--out", out, "--max-turns", "4"}
	for _, b := range benchEdits {
		args = append(args, "--task", b.fixture)
	}
	res := e.agentrun([]string{"SCRIPTED_KEY=" + realKey}, args...)
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	must(t, res, 0)
	s := loadSchemas(t)
	if err := s.Validate("bench.schema.json", []byte(res.stdout), jsonschema.Options{}); err != nil {
		t.Errorf("bench --json: %v\n%s", err, res.stdout)
	}
	var sum bench.Summary
	if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Models) != 1 {
		t.Fatalf("want one agent/model: %s", res.stdout)
	}
	if m := sum.Models[0]; m.Name != "builtin/test-model" || m.Runs != 3 || m.Passed != 1 || m.Failed != 1 || m.Gamed != 1 || m.Errors != 0 {
		t.Errorf("summary %+v", m)
	}
	// The results file: a header, then a line a run, each valid.
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if err := s.Validate("bench-results.schema.json", []byte(line), jsonschema.Options{}); err != nil {
			t.Errorf("results line %d: %v\n%s", i+1, err, line)
		}
	}
	h, results, err := bench.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if h.Sandbox != "native" || h.Repeat != 1 || len(h.Fixtures) != 3 {
		t.Errorf("header %+v", h)
	}
	for _, b := range benchEdits {
		r := resultOf(t, results, b.fixture)
		if r.Status != b.want {
			t.Errorf("%s: %s (%s), want %s\n%+v", b.fixture, r.Status, r.Message, b.want, r)
			continue
		}
		if r.RunStatus != "succeeded" || r.Turns < 1 || r.Tokens.Total == 0 || r.WallMS <= 0 || r.Overhead.SandboxStartMS <= 0 {
			t.Errorf("%s: the run's facts are missing: %+v", b.fixture, r)
		}
		switch b.want {
		case bench.StatusGamed:
			if len(r.Gamed) != 1 || r.Gamed[0] != "accept.sh" || r.Accept != nil {
				t.Errorf("%s: gamed %v, accept %+v: want accept.sh, and no acceptance run", b.fixture, r.Gamed, r.Accept)
			}
		case bench.StatusFailed:
			if r.Accept == nil || r.Accept.ExitCode == 0 || !strings.Contains(r.Accept.Output, "FAIL") {
				t.Errorf("%s: accept %+v, want it failed", b.fixture, r.Accept)
			}
		case bench.StatusPassed:
			if r.Accept == nil || r.Accept.ExitCode != 0 || !fileExists(r.Accept.Log) {
				t.Errorf("%s: accept %+v, want it passed with its log kept", b.fixture, r.Accept)
			}
		}
	}
	// summarize reads it back, as the same document, and writes the page.
	page := filepath.Join(e.root, "bench.html")
	res = e.agentrun(nil, "bench", "summarize", out, "--json", "--html", page)
	must(t, res, 0)
	if err := s.Validate("bench.schema.json", []byte(res.stdout), jsonschema.Options{}); err != nil {
		t.Errorf("bench summarize --json: %v\n%s", err, res.stdout)
	}
	html, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(html, []byte(`data-model="builtin/test-model"`)) {
		t.Errorf("the page has no point for the model: %v", err)
	}
	res = e.agentrun(nil, "bench", "summarize", out)
	must(t, res, 0)
	for _, want := range []string{"builtin/test-model", "33%", "py-off-by-one", "js-numeric-sort"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("bench summarize: no %q in\n%s", want, res.stdout)
		}
	}
}

func resultOf(t *testing.T, rs []bench.Result, fixture string) bench.Result {
	t.Helper()
	for _, r := range rs {
		if r.Fixture == fixture {
			return r
		}
	}
	t.Fatalf("no result for %s", fixture)
	return bench.Result{}
}

// bench check judges fixtures as a bench would, in the native sandbox:
// ours pass it; a fixture of the repository's bench/ whose acceptance
// passes on its base is reported (exit 1).
func TestBenchCheck(t *testing.T) {
	e := newEnv(t)
	res := e.run("bench", "check", "--sandbox", "native", "--builtin-fixtures", "--task", "py-rename-module", "--task", "go-interface", "--json")
	if res.code == 2 && strings.Contains(res.stdout, "sandbox_preflight") {
		requireCaps(t, "the native sandbox", false, res.stdout)
	}
	must(t, res, 0)
	s := loadSchemas(t)
	if err := s.Validate("bench-check.schema.json", []byte(res.stdout), jsonschema.Options{}); err != nil {
		t.Errorf("bench check --json: %v\n%s", err, res.stdout)
	}
	fx := filepath.Join(e.repo, "bench", "always-passes")
	for name, data := range map[string]string{"task.md": "Do nothing.\n", "accept.sh": "true\n", "repo/x.txt": "x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(fx, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fx, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res = e.run("bench", "list", "--json")
	must(t, res, 0)
	if !strings.Contains(res.stdout, `"always-passes"`) || strings.Contains(res.stdout, "py-off-by-one") {
		t.Errorf("bench list in a repository with bench/ lists its fixtures only:\n%s", res.stdout)
	}
	res = e.run("bench", "check", "--sandbox", "native", "--json")
	must(t, res, 1)
	var doc struct {
		Checks []bench.Check `json:"checks"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || len(doc.Checks) != 1 || doc.Checks[0].OK || !strings.Contains(doc.Checks[0].Problem, "does not fail on the base") {
		t.Errorf("%v: %s", err, res.stdout)
	}
}
