package cli

// The machine contract: every command's --json output is held to its
// schema in docs/json (one file a command), so a change to the contract is
// a visible diff there. submit, resume and their --follow streams need the
// real binary: internal/e2e/schema_test.go holds them to the same files.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/transcript"
	"github.com/agentrun/agentrun/internal/bench"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/testsupport"
)

// Every field an output type can print is declared by its schema: each
// type is filled in completely (every omitempty field set) and checked
// for its shape, so a field added to a type without its schema fails here.
func TestJSONSchemasDeclareEveryField(t *testing.T) {
	s := schemas(t)
	wrap := func(key string, v []byte) []byte {
		return []byte(fmt.Sprintf(`{"id":"x",%q:%s}`, key, v))
	}
	for _, c := range []struct {
		schema string
		doc    []byte
	}{
		{"submit.schema.json", filled[submitOutput]()},
		{"resume.schema.json", filled[submitOutput]()},
		{"stream.schema.json", filled[endLine]()},
		{"stream.schema.json", filled[logLine]()},
		{"stream.schema.json", filled[run.Event]()},
		{"stream.schema.json", []byte(`{"error":` + string(filled[catalog.Error]()) + `}`)},
		{"error.schema.json", []byte(`{"error":` + string(filled[catalog.Error]()) + `}`)},
		{"list.schema.json", filled[listOutput]()},
		{"status.schema.json", filled[run.Run]()},
		{"status.schema.json", filled[statusOutput]()},
		{"gc.schema.json", filled[gcOutput]()},
		{"setup.schema.json", filled[setupOutput]()},
		{"logs.schema.json", wrap("logs", []byte("["+string(filled[logPiece]())+"]"))},
		{"logs-events.schema.json", wrap("events", []byte("["+string(filled[run.Event]())+"]"))},
		{"cancel.schema.json", filled[cancelOutput]()},
		{"result.schema.json", filled[resultOutput]()},
		{"clean.schema.json", filled[cleanOutput]()},
		{"verdict.schema.json", wrap("verdict", filled[run.Verdict]())},
		{"egress.schema.json", filled[egressOutput]()},
		{"version.schema.json", filled[versionInfo]()},
		{"doctor.schema.json", filled[doctorOutput]()},
		{"config.schema.json", filled[configOutput]()},
		{"users.schema.json", filled[usersDoc]()},
		{"user.schema.json", filled[userDoc]()},
		{"tokens.schema.json", filled[tokensDoc]()},
		{"token.schema.json", filled[tokenDoc]()},
		{"quota.schema.json", filled[quotaDoc]()},
		{"me.schema.json", filled[server.MeDoc]()},
		{"login.schema.json", filled[loginOutput]()},
		{"logout.schema.json", filled[logoutOutput]()},
		{"bench.schema.json", filled[bench.Summary]()},
		{"bench-results.schema.json", filled[bench.Header]()},
		{"bench-results.schema.json", filled[bench.Result]()},
		{"bench-compare.schema.json", filled[bench.Comparison]()},
		{"bench-list.schema.json", []byte(`{"fixtures":[` + string(filled[fixtureLine]()) + `]}`)},
		{"bench-check.schema.json", []byte(`{"checks":[` + string(filled[bench.Check]()) + `]}`)},
		{"server-hosts.schema.json", []byte(`{"hosts":[` + string(filled[server.Host]()) + `]}`)},
		{"server-revoke-host.schema.json", filled[server.Host]()},
		{"server-enrol-token.schema.json", filled[server.EnrolToken]()},
	} {
		if err := s.Validate(c.schema, c.doc, jsonschema.Options{Shape: true}); err != nil {
			t.Errorf("%v\nfilled in: %s", err, c.doc)
		}
	}
}

// Every command's --json output, of a run with every part filled in,
// against its schema.
func TestJSONOutputMatchesSchemas(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) {
		r.Agent = run.AgentSpec{Name: "builtin", Model: "qwen3-coder", Provider: "openai", Env: []string{"OPENAI_API_KEY"}, Hosts: []string{"api.example"}}
		r.Sandbox = run.SandboxConfig{Backend: "native", Network: "allowlist", Allow: []string{"proxy.golang.org"},
			Limits: run.Limits{MemoryBytes: 1 << 30, Pids: 512, CPUs: 2, DiskBytes: 1 << 30}}
		r.Export = run.ExportConfig{MaxFiles: 1000, MaxBytes: 1 << 20}
		r.Timeout = run.Duration(30 * time.Minute)
		r.Patch = "/tmp/result.patch"
		r.Gateway = &run.GatewaySpec{Routes: []run.RouteSpec{{Name: "openai", URL: "https://api.example/v1",
			Keys: []run.KeySource{{Env: "OPENAI_API_KEY", Header: "authorization"}}}}, MaxTokens: 100000}
		r.Usage = &run.Usage{PromptTokens: 1200, CompletionTokens: 300, Turns: 4, Requests: 4, CostUSD: 0.01,
			Models: map[string]run.ModelUsage{"qwen3-coder": {PromptTokens: 1200, CompletionTokens: 300, Requests: 4, CostUSD: 0.01}}}
		r.Verdict = &run.Verdict{Value: "accept", Note: "ok", By: "reviewer", At: time.Now().UTC()}
	})
	ctx := context.Background()
	for _, e := range []run.Event{
		run.NewEvent(run.EventSubmitted, "submitted", nil),
		{Type: run.EventState, State: run.StateRunning},
		{Type: run.EventAttempt, Attempt: 1},
		run.NewEvent(run.EventCheck, "", map[string]any{"name": "unit", "exit_code": 1, "passed": false}),
		run.NewEvent(run.EventEgress, "", egress.Record{Allow: true, Host: "proxy.golang.org", Port: 443, Method: "CONNECT", Rule: "proxy.golang.org", BytesUp: 10, BytesDn: 20}),
		run.NewEvent(run.EventEgress, "", egress.Record{Host: "evil.example", Port: 443, Method: "CONNECT", Why: "not in allowlist", Code: egress.CodeNotListed}),
		{Type: run.EventState, State: run.StateSucceeded, Reason: run.ReasonCompleted},
	} {
		if e.Time.IsZero() {
			e.Time = time.Now().UTC()
		}
		if _, err := h.st.AppendEvent(ctx, r.ID, e); err != nil {
			t.Fatal(err)
		}
	}
	writeTranscript(t, h, r.ID, 2)
	// A damaged record, for list's broken and clean's kept.
	broken := h.add(nil)
	h.write(h.st.L.RunJSON(broken.ID), `{"id": 7`)
	interrupted := h.add(func(r *run.Run) { r.State, r.Reason = run.StateInterrupted, run.ReasonInterrupted })

	ok := func(args ...string) string {
		t.Helper()
		code, out, errb := h.exec(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errb)
		}
		return out
	}
	validDoc(t, "list.schema.json", "list", ok("list", "--json"))
	validDoc(t, "status.schema.json", "status", ok("status", r.ID, "--json"))
	validDoc(t, "logs.schema.json", "logs", ok("logs", r.ID, "--json"))
	validDoc(t, "logs.schema.json", "logs --check", ok("logs", r.ID, "--check", "unit", "--json"))
	validDoc(t, "logs-events.schema.json", "logs --events", ok("logs", r.ID, "--events", "--json"))
	validDoc(t, "result.schema.json", "result", ok("result", r.ID, "--json"))
	if d := validDoc(t, "result.schema.json", "result --patch", ok("result", r.ID, "--patch", "--json")); d["patch_text"] == nil {
		t.Errorf("result --patch has no patch_text")
	}
	validDoc(t, "diff.schema.json", "diff", ok("diff", r.ID, "--json"))
	validDoc(t, "egress.schema.json", "egress", ok("egress", r.ID, "--json"))
	validDoc(t, "verdict.schema.json", "verdict", ok("verdict", r.ID, "reject", "--note", "no", "--json"))
	validDoc(t, "version.schema.json", "version", ok("version", "--json"))
	validDoc(t, "config.schema.json", "config", ok("config", "--json"))
	validDoc(t, "man.schema.json", "man", ok("man", filepath.Join(t.TempDir(), "man1"), "--json"))
	validDoc(t, "cancel.schema.json", "cancel", ok("cancel", r.ID, "--json"))
	for _, args := range [][]string{{"logs", r.ID, "-f", "--json"}, {"logs", r.ID, "-f", "--check", "unit", "--json"}, {"logs", r.ID, "-f", "--events", "--json"}} {
		lines := validLines(t, strings.Join(args, " "), ok(args...))
		if len(lines) < 2 || lines[len(lines)-1]["type"] != "end" || lines[len(lines)-1]["status"] != "succeeded" {
			t.Errorf("%v: the stream does not end with the run: %v", args, lines)
		}
	}
	validDoc(t, "gc.schema.json", "gc --dry-run", ok("gc", "--dry-run", "--json"))
	code, out, _ := h.exec("clean", "--finished", "--json")
	if d := validDoc(t, "clean.schema.json", "clean --finished", out); code != 0 || len(d["kept"].([]any)) != 2 {
		t.Errorf("clean --finished: exit %d, want the damaged and the interrupted run kept: %s", code, out)
	}
	validDoc(t, "clean.schema.json", "clean ID", ok("clean", interrupted.ID, "--json"))
	for _, args := range [][]string{
		{"status", "zzzzzzzzzz", "--json"},
		{"status", "../etc", "--json"},
		{"nosuchcommand", "--json"},
		{"logs", broken.ID, "--json"},
	} {
		code, out, _ := h.exec(args...)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
		validDoc(t, "error.schema.json", strings.Join(args, " "), out)
	}
}

// clean --delete-branch: branch_deleted and branch_kept are booleans, the
// branch is named in branch.
func TestCleanJSONBranchIsBoolean(t *testing.T) {
	h := newTestHome(t)
	g := newGitRepo(t)
	r := runWithBranch(t, h, g)
	code, out, _ := h.exec("clean", r.ID, "--delete-branch", "--json")
	d := validDoc(t, "clean.schema.json", "clean --delete-branch", out)
	rm, _ := d["removed"].([]any)
	if code != 0 || len(rm) != 1 {
		t.Fatalf("exit %d: %s", code, out)
	}
	got := rm[0].(map[string]any)
	if got["branch"] != r.Branch || got["branch_deleted"] != true || got["branch_kept"] != false {
		t.Errorf("want branch %s deleted: %s", r.Branch, out)
	}
	// A branch that cannot be read (the repository is gone) is kept, and
	// says why.
	r2 := h.addFinished(func(r *run.Run) { r.Repo = filepath.Join(t.TempDir(), "gone") })
	code, out, _ = h.exec("clean", r2.ID, "--delete-branch", "--json")
	d = validDoc(t, "clean.schema.json", "clean --delete-branch (repository gone)", out)
	rm, _ = d["removed"].([]any)
	if code != 0 || len(rm) != 1 {
		t.Fatalf("exit %d: %s", code, out)
	}
	got = rm[0].(map[string]any)
	if got["branch_deleted"] != false || got["branch_kept"] != true || !strings.Contains(fmt.Sprint(got["branch_kept_reason"]), "repository unavailable") {
		t.Errorf("want the branch kept with its reason: %s", out)
	}
}

// cancel --json prints id, status, reason first, as submit and result do.
func TestCancelJSONKeyOrder(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	_, out, _ := h.exec("cancel", r.ID, "--json")
	validDoc(t, "cancel.schema.json", "cancel", out)
	if got := strings.Join(topKeys(t, out), ","); got != "id,status,reason,already_ended" {
		t.Errorf("cancel keys %s", got)
	}
	_, out, _ = h.exec("result", r.ID, "--json")
	if got := strings.Join(topKeys(t, out)[:3], ","); got != "id,status,reason" {
		t.Errorf("result keys %s", got)
	}
	if got := jsonFieldNames(reflect.TypeOf(submitOutput{}))[:3]; strings.Join(got, ",") != "id,status,reason" {
		t.Errorf("submit keys %v", got)
	}
}

func jsonFieldNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// logs --json of a built-in agent run has the transcript that the human
// logs shows.
func TestLogsJSONHasTranscript(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) { r.Agent = run.AgentSpec{Name: "builtin", Model: "m"} })
	want := writeTranscript(t, h, r.ID, 2)
	code, out, errb := h.exec("logs", r.ID, "--attempt", "2", "--json")
	validDoc(t, "logs.schema.json", "logs", out)
	var doc struct {
		Logs []logPiece `json:"logs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || len(doc.Logs) != 1 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if !reflect.DeepEqual(doc.Logs[0].Transcript, want) {
		t.Errorf("transcript\n got %+v\nwant %+v", doc.Logs[0].Transcript, want)
	}
	if !strings.Contains(errb, "1 damaged lines left out") {
		t.Errorf("no warning for the damaged line: %q", errb)
	}
	// An attempt without a transcript has none.
	_, out, _ = h.exec("logs", r.ID, "--attempt", "1", "--json")
	if strings.Contains(out, `"transcript"`) {
		t.Errorf("attempt 1 has no transcript: %s", out)
	}
}

// writeTranscript writes a transcript for attempt n (with one damaged
// line) and returns its records.
func writeTranscript(t *testing.T, h *testHome, id string, n int) []transcript.Record {
	recs := []transcript.Record{
		{Type: transcript.RecRunStart, Attempt: n, Model: "qwen3-coder", Provider: "openai", ContextWindow: 32768, WindowSource: "server",
			Settings: map[string]any{"temperature": 0.2}},
		{Type: transcript.RecAssistant, Turn: 1, Content: "I will read the file.", Reasoning: "look first", FinishReason: "tool_calls",
			ToolCalls: []provider.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"auth.go"}`}},
			Usage:     &run.Usage{PromptTokens: 100, CompletionTokens: 20}},
		{Type: transcript.RecToolResult, Turn: 1, ToolCallID: "c1", Tool: "read_file", Kind: "ok", Output: "package auth\n", Bytes: 13},
		{Type: transcript.RecNudge, Turn: 2, Text: "use a tool"},
		{Type: transcript.RecCompaction, Turn: 3, Method: "summary", Before: 30000, After: 4000},
		{Type: transcript.RecWarning, Text: "slow model"},
		{Type: transcript.RecRunEnd, Status: "completed", Message: "done", Turns: 3},
	}
	var b strings.Builder
	for i, rec := range recs {
		j, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
		if i == 2 {
			b.WriteString("{damaged\n")
		}
	}
	h.write(h.st.L.Transcript(id, n), b.String())
	return recs
}

// A followed stream that ends with an error ends with one compact error
// line: every line of the stream is one JSON object.
func TestFollowJSONErrorIsOneLine(t *testing.T) {
	h := newTestHome(t)
	r := activeRun(t, h)
	go func() {
		appendLines(t, h.st.L.AgentLog(r.ID, 1), []string{"first", "second"})
		// The record is damaged while it is followed.
		h.write(h.st.L.RunJSON(r.ID), `{"id": 7`)
	}()
	code, out, _ := h.exec("logs", r.ID, "-f", "--json")
	lines := validLines(t, "logs -f", out)
	if code != 2 || len(lines) == 0 || lines[len(lines)-1]["error"] == nil {
		t.Fatalf("exit %d, want the stream to end with the run_damaged error line:\n%s", code, out)
	}
	// Before the stream starts, too.
	for _, args := range [][]string{{"logs", "zzzzzzzzzz", "-f", "--json"}, {"logs", "zzzzzzzzzz", "-f", "--events", "--json"}} {
		code, out, _ := h.exec(args...)
		if lines := validLines(t, strings.Join(args, " "), out); code != 3 || len(lines) != 1 || lines[0]["error"] == nil {
			t.Errorf("%v: exit %d, want one error line:\n%s", args, code, out)
		}
	}
	// Not streaming, the error document stays as it was.
	_, out, _ = h.exec("logs", "zzzzzzzzzz", "--json")
	if strings.Count(out, "\n") < 3 {
		t.Errorf("logs --json error is not the indented document: %q", out)
	}
}

// doctor --json against its schema (it starts real sandboxes).
func TestDoctorJSONMatchesSchema(t *testing.T) {
	h := newTestHome(t)
	h.executable = testsupport.Agentrun(t)
	h.env["PATH"] = os.Getenv("PATH")
	_, out, _ := h.exec("doctor", "--json")
	validDoc(t, "doctor.schema.json", "doctor", out)
}
