package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrun/agentrun/internal/testsupport"
)

// The server offers the ten tools, each with an input schema, and the two
// resource templates.
func TestToolsAndResources(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(nil)
	ctx := context.Background()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.InputSchema == nil || tool.Description == "" || tool.Annotations == nil {
			t.Errorf("tool %s: no input schema, description or annotations", tool.Name)
		}
	}
	slices.Sort(names)
	want := []string{"cancel", "diff", "egress", "list", "logs", "result", "resume", "status", "submit", "verdict"}
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	var templates []string
	for rt, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates = append(templates, rt.URITemplate)
	}
	slices.Sort(templates)
	if want := []string{"agentrun://runs/{id}/attempts/{n}/transcript", "agentrun://runs/{id}/patch"}; !slices.Equal(templates, want) {
		t.Errorf("resource templates %v, want %v", templates, want)
	}
}

// A real run end to end: submit, follow it through logs with the cursor
// to the end (each event and each output line once), then read its
// status, result, diff, patch resource and transcript, record a verdict.
// Every structured result is the --json document of the CLI command.
func TestSubmitFollowDiff(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(nil)
	agent := `for i in 1 2 3; do echo "line $i"; sleep 0.05; done; printf 'no newline at the end'; echo new > NEW.txt`
	sub := ok(t, cs, "submit", "submit.schema.json", map[string]any{
		"task": "Write NEW.txt", "agent_cmd": agent, "sandbox": "host",
		"checks": []map[string]any{{"name": "exists", "command": "test -f NEW.txt"}},
	})
	id, _ := sub["id"].(string)
	if id == "" {
		t.Fatalf("no run id: %v", sub)
	}
	events, output, last := follow(t, cs, id)
	var seqs []int64
	ended := false
	for _, e := range events {
		seqs = append(seqs, int64(e["seq"].(float64)))
		if e["type"] == "state" && e["status"] == "succeeded" {
			ended = true
		}
	}
	if !slices.IsSorted(seqs) || len(slices.Compact(slices.Clone(seqs))) != len(seqs) || len(seqs) == 0 || seqs[0] != 1 {
		t.Errorf("journal seqs %v: want each event once, in order, from 1", seqs)
	}
	if !ended {
		t.Errorf("the journal has no succeeded state: %v", events)
	}
	if want := "line 1\nline 2\nline 3\nno newline at the end"; output != want {
		t.Errorf("followed output %q, want %q", output, want)
	}
	if run, _ := last["run"].(map[string]any); run["status"] != "succeeded" || run["commit"] == "" {
		t.Errorf("the last answer's run: %v", last["run"])
	}

	st := ok(t, cs, "status", "status.schema.json", map[string]any{"id": id[:6]})
	if st["id"] != id {
		t.Errorf("status by prefix: id %v", st["id"])
	}
	ok(t, cs, "list", "list.schema.json", map[string]any{"status": []string{"succeeded"}, "limit": 5})
	ok(t, cs, "result", "result.schema.json", map[string]any{"id": id, "patch": true})
	ok(t, cs, "egress", "egress.schema.json", map[string]any{"id": id})
	ok(t, cs, "logs", "logs.schema.json", map[string]any{"id": id})
	ok(t, cs, "logs", "logs.schema.json", map[string]any{"id": id, "check": "exists", "attempt": 1})
	ok(t, cs, "logs", "logs-events.schema.json", map[string]any{"id": id, "events": true})
	diff := ok(t, cs, "diff", "diff.schema.json", map[string]any{"id": id})
	patch, _ := diff["patch"].(string)
	if !strings.Contains(patch, "+++ b/NEW.txt") || !strings.Contains(patch, "+new") {
		t.Errorf("diff: %q", patch)
	}
	ctx := context.Background()
	res, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "agentrun://runs/" + id + "/patch"})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Contents[0]; c.Text != patch || c.MIMEType != "text/x-diff" {
		t.Errorf("patch resource (%s) differs from diff: %q", c.MIMEType, c.Text)
	}
	res, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "agentrun://runs/" + id + "/attempts/1/transcript"})
	if err != nil {
		t.Fatal(err)
	}
	// An external agent keeps no transcript: the resource is what it printed.
	if c := res.Contents[0]; c.MIMEType != "text/plain" || !strings.HasPrefix(c.Text, "line 1\n") {
		t.Errorf("transcript resource (%s): %q", c.MIMEType, c.Text)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "agentrun://runs/" + id + "/attempts/2/transcript"}); err == nil {
		t.Error("attempt 2's transcript: want an error, the run had one attempt")
	}
	v := ok(t, cs, "verdict", "verdict.schema.json", map[string]any{"id": id, "verdict": "accept", "note": "--json=false looks like a flag"})
	if vd, _ := v["verdict"].(map[string]any); vd["note"] != "--json=false looks like a flag" {
		t.Errorf("the note went elsewhere than the note: %v", v)
	}
}

// follow reads a run through logs with follow and the cursor until done,
// and returns the events, the agent output and the last answer, each
// answer held to the schema.
func follow(t *testing.T, cs *sdk.ClientSession, id string) (events []map[string]any, output string, last map[string]any) {
	t.Helper()
	var cursor any
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		args := map[string]any{"id": id, "follow": true, "wait_seconds": 5}
		if cursor != nil {
			args["cursor"] = cursor
		}
		d := ok(t, cs, "logs", "mcp-tail.schema.json", args)
		for _, e := range d["events"].([]any) {
			events = append(events, e.(map[string]any))
		}
		for _, p := range d["output"].([]any) {
			output += p.(map[string]any)["text"].(string)
		}
		cursor = d["cursor"]
		if d["done"] == true {
			return events, output, d
		}
	}
	t.Fatalf("run %s: not done after a minute of following", id)
	return nil, "", nil
}

// submit with wait returns the ended run as submit --wait --json prints
// it, after a progress notification for each journal event.
func TestSubmitWaitSendsProgress(t *testing.T) {
	w := newWorld(t)
	var mu sync.Mutex
	var progress []*sdk.ProgressNotificationParams
	cs := w.connect(&sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		progress = append(progress, req.Params)
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	params := &sdk.CallToolParams{Name: "submit", Arguments: map[string]any{
		"task": "Write a file", "agent_cmd": "echo done > done.txt", "sandbox": "host", "wait": true}}
	params.SetProgressToken("submit-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("submit: %s", text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	d := valid(t, "submit.schema.json", "submit wait", b)
	if d["status"] != "succeeded" || d["commit"] == "" {
		t.Errorf("submit wait: %s", b)
	}
	// The notifications were sent before the result, but the client hands
	// them to the handler on its own time.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(progress)
		end := n > 0 && progress[n-1].Message == "state succeeded"
		mu.Unlock()
		if end {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var msgs []string
	for i, p := range progress {
		if p.ProgressToken != "submit-1" || (i > 0 && p.Progress <= progress[i-1].Progress) {
			t.Errorf("progress %d: token %v, progress %v after %v", i, p.ProgressToken, p.Progress, progress[max(i-1, 0)].Progress)
		}
		msgs = append(msgs, p.Message)
	}
	if !slices.Contains(msgs, "attempt 1 started") || !slices.Contains(msgs, "state succeeded") {
		t.Errorf("progress messages %q: want the attempt and the end", msgs)
	}
}

// A running run is cancelled through the cancel tool.
func TestCancel(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(nil)
	sub := ok(t, cs, "submit", "submit.schema.json", map[string]any{
		"task": "Sleep", "agent_cmd": "echo started; sleep 60", "sandbox": "host"})
	id := sub["id"].(string)
	// Wait for the agent to have started, through the follow cursor.
	var cursor any
	for deadline := time.Now().Add(30 * time.Second); ; {
		args := map[string]any{"id": id, "follow": true, "wait_seconds": 2}
		if cursor != nil {
			args["cursor"] = cursor
		}
		d := ok(t, cs, "logs", "mcp-tail.schema.json", args)
		cursor = d["cursor"]
		if out, _ := d["output"].([]any); len(out) > 0 {
			break
		}
		if time.Now().After(deadline) || d["done"] == true {
			t.Fatalf("the agent never started: %v", d)
		}
	}
	c := ok(t, cs, "cancel", "cancel.schema.json", map[string]any{"id": id})
	if c["status"] != "cancelled" || c["already_ended"] != false {
		t.Errorf("cancel: %v", c)
	}
	c = ok(t, cs, "cancel", "cancel.schema.json", map[string]any{"id": id})
	if c["already_ended"] != true {
		t.Errorf("second cancel: %v", c)
	}
}

// Bad input gets the CLI's catalog error as a tool error: no such run, a
// bad id, a bad attempts value, a value that looks like a flag, no agent.
// The resources answer with JSON-RPC errors.
func TestCatalogErrorsAreToolErrors(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(nil)
	for _, c := range []struct {
		tool string
		args map[string]any
		code string
	}{
		{"status", map[string]any{"id": "zzzzzzzzzz"}, "run_not_found"},
		{"status", map[string]any{"id": "../../etc"}, "bad_id"},
		{"status", map[string]any{"id": "--help"}, "bad_id"},
		{"diff", map[string]any{"id": "zzzzzzzzzz"}, "run_not_found"},
		{"submit", map[string]any{"task": "x", "agent_cmd": "true", "sandbox": "host", "attempts": -1}, "bad_attempts"},
		{"submit", map[string]any{"task": "x", "sandbox": "host"}, "no_agent"},
		{"submit", map[string]any{"task": "", "agent_cmd": "true", "sandbox": "host"}, "empty_task"},
		{"submit", map[string]any{"task": "x", "agent_cmd": "true", "sandbox": "--json"}, "unknown_sandbox"},
		{"verdict", map[string]any{"id": "zzzzzzzzzz", "verdict": "maybe"}, "bad_verdict"},
		{"logs", map[string]any{"id": "zzzzzzzzzz", "follow": true}, "run_not_found"},
		{"list", map[string]any{"status": []string{"nonsense"}}, "bad_status"},
	} {
		res, doc := call(t, cs, c.tool, c.args)
		e := catalogErr(t, res, doc, c.code)
		if e["exit_code"] == nil || e["error"] == "" {
			t.Errorf("%s %v: %v", c.tool, c.args, e)
		}
	}
	// Nothing was started by the refused submits.
	if d := ok(t, cs, "list", "list.schema.json", map[string]any{}); len(d["runs"].([]any)) != 0 {
		t.Errorf("refused submits created runs: %v", d["runs"])
	}
	// Input the schema refuses never reaches the CLI.
	if res, _ := call(t, cs, "status", map[string]any{"id": "abc", "force": true}); !res.IsError {
		t.Error("an unknown argument was accepted")
	}
	ctx := context.Background()
	for _, c := range []struct{ uri, code string }{
		{"agentrun://runs/zzzzzzzzzz/patch", "run_not_found"},
		{"agentrun://runs/zzzzzzzzzz/attempts/1/transcript", "run_not_found"},
		{"agentrun://runs/..%2F..%2Fetc/patch", "bad_id"},
		{"agentrun://runs/x/attempts/0/transcript", ""},
	} {
		_, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: c.uri})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: %v, want invalid params", c.uri, err)
			continue
		}
		if c.code != "" && !strings.Contains(string(we.Data), `"code":"`+c.code+`"`) {
			t.Errorf("%s: data %s, want the catalog error %s", c.uri, we.Data, c.code)
		}
	}
}

// The same through the native sandbox: the agent cannot see the host, and
// the run still ends with its patch.
func TestSubmitNative(t *testing.T) {
	w := newWorld(t)
	cs := w.connect(nil)
	res, doc := call(t, cs, "submit", map[string]any{"task": "Write a file", "sandbox": "native", "wait": true,
		"agent_cmd": "echo native > native.txt; test ! -e " + w.home})
	if res.IsError && strings.Contains(string(doc), "sandbox_preflight") {
		testsupport.Require(t, "the native sandbox", false, "%s", text(res))
	}
	d := valid(t, "submit.schema.json", "submit native", doc)
	if res.IsError || d["status"] != "succeeded" {
		t.Fatalf("submit native: %s %s", doc, text(res))
	}
	st := ok(t, cs, "status", "status.schema.json", map[string]any{"id": d["id"]})
	if sb, _ := st["sandbox"].(map[string]any); sb["backend"] != "native" {
		t.Errorf("sandbox %v", st["sandbox"])
	}
	diff := ok(t, cs, "diff", "diff.schema.json", map[string]any{"id": d["id"]})
	if !strings.Contains(diff["patch"].(string), "+native") {
		t.Errorf("patch: %v", diff["patch"])
	}
}
