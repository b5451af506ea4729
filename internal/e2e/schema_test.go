package e2e

// The machine contract, for what needs the real binary: submit, resume
// and the followed streams, held to the schemas in docs/json (the same
// files internal/cli/schema_test.go uses).

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/jsonschema"
	"github.com/agentrun/agentrun/internal/run"
)

func loadSchemas(t *testing.T) *jsonschema.Set {
	t.Helper()
	s, err := jsonschema.Load("../../docs/json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// streamLines checks that out is one compact JSON object a line, each
// valid against stream.schema.json, and decodes them.
func streamLines(t *testing.T, s *jsonschema.Set, what, out string) []map[string]any {
	t.Helper()
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("%s: does not end with a newline: %q", what, out)
	}
	var lines []map[string]any
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if err := s.Validate("stream.schema.json", []byte(l), jsonschema.Options{}); err != nil {
			t.Fatalf("%s: line %d: %v\n%s", what, i+1, err, l)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(l), &m)
		lines = append(lines, m)
	}
	return lines
}

func byType(lines []map[string]any, pick func(typ string) bool) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if typ, _ := l["type"].(string); pick(typ) {
			out = append(out, l)
		}
	}
	return out
}

func isEvent(typ string) bool { return typ != "output" && typ != "end" && typ != "" }

// submit --follow --json and logs -f --json print the same objects for the
// same things: output lines (an unfinished last line included, at the end
// of its attempt), journal events, and the run at the end.
func TestFollowStreamsMatchSchemaAndEachOther(t *testing.T) {
	e := newEnv(t)
	s := loadSchemas(t)
	agent := `if grep -qi 'check "good" failed'; then echo good > state.txt; echo second-2; printf tail-2;` +
		` else echo bad > state.txt; echo first-1; printf tail-1; fi`
	res := e.run("submit", "--json", "--follow", "--sandbox", "host", "--agent-cmd", agent, "--attempts", "2",
		"--check", "good=grep -q good state.txt", "make state good")
	must(t, res, 0)
	sub := streamLines(t, s, "submit --follow --json", res.stdout)
	end := sub[len(sub)-1]
	if end["type"] != "end" || end["status"] != "succeeded" || end["commit"] == "" {
		t.Fatalf("last line %v", end)
	}
	id := end["id"].(string)
	var got []string
	for _, l := range sub {
		switch {
		case l["type"] == "output":
			got = append(got, l["line"].(string)+"@"+jsonNum(l["attempt"]))
		case l["type"] == "attempt" && jsonNum(l["attempt"]) == "2":
			got = append(got, "attempt 2 starts")
		}
	}
	if want := "first-1@1 tail-1@1 attempt 2 starts second-2@2 tail-2@2"; strings.Join(got, " ") != want {
		t.Errorf("submit --follow output\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	res = e.run("logs", id, "-f", "--json")
	must(t, res, 0)
	logs := streamLines(t, s, "logs -f --json", res.stdout)
	if !reflect.DeepEqual(byType(logs, func(t string) bool { return t == "output" }), byType(sub, func(t string) bool { return t == "output" })) {
		t.Errorf("output lines differ:\nsubmit --follow %v\nlogs -f %v", byType(sub, func(t string) bool { return t == "output" }), logs)
	}
	if !reflect.DeepEqual(logs[len(logs)-1], end) {
		t.Errorf("end lines differ:\nsubmit --follow %v\nlogs -f %v", end, logs[len(logs)-1])
	}

	res = e.run("logs", id, "-f", "--events", "--json")
	must(t, res, 0)
	evs := streamLines(t, s, "logs -f --events --json", res.stdout)
	subEvs, logEvs := byType(sub, isEvent), byType(evs, isEvent)
	if len(subEvs) == 0 || len(logEvs) < len(subEvs) || !reflect.DeepEqual(logEvs[:len(subEvs)], subEvs) {
		t.Errorf("events differ:\nsubmit --follow %v\nlogs -f --events %v", subEvs, logEvs)
	}
	if !reflect.DeepEqual(evs[len(evs)-1], end) {
		t.Errorf("logs -f --events does not end with the run: %v", evs[len(evs)-1])
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// submit and resume --json documents (plain, --wait, --follow), and the
// error of a followed stream: one line.
func TestSubmitResumeJSONMatchSchemas(t *testing.T) {
	e := newEnv(t)
	s := loadSchemas(t)
	valid := func(schema, what, out string) map[string]any {
		t.Helper()
		if err := s.Validate(schema, []byte(out), jsonschema.Options{}); err != nil {
			t.Errorf("%s: %v\n%s", what, err, out)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(out), &m)
		return m
	}
	res := e.run("submit", "--json", "--sandbox", "host", "--agent-cmd", "echo x > x.txt", "t")
	must(t, res, 0)
	d := valid("submit.schema.json", "submit", res.stdout)
	e.waitFor(d["id"].(string), "the run to end", func(r *run.Run) bool { return r.State.Terminal() })

	// A run that fails its check, resumed with --wait and with --follow.
	failed := func() string {
		res := e.run("submit", "--json", "--wait", "--sandbox", "host", "--agent-cmd", "echo x >> x.txt", "--attempts", "1",
			"--check", "two=test $(wc -l < x.txt) -ge 2", "t")
		if res.code != 1 {
			t.Fatalf("submit --wait: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
		}
		return valid("submit.schema.json", "submit --wait", res.stdout)["id"].(string)
	}
	res = e.run("resume", "--json", "--wait", failed())
	must(t, res, 0)
	if d := valid("resume.schema.json", "resume --wait", res.stdout); d["status"] != "succeeded" {
		t.Errorf("resume --wait: %v", d)
	}
	res = e.run("resume", "--json", "--follow", failed())
	must(t, res, 0)
	lines := streamLines(t, s, "resume --follow --json", res.stdout)
	if last := lines[len(lines)-1]; last["type"] != "end" || last["status"] != "succeeded" {
		t.Errorf("resume --follow: last line %v", last)
	}

	for _, args := range [][]string{
		{"submit", "--json", "--follow", "--sandbox", "nosuchbackend", "--agent-cmd", "true", "t"},
		{"resume", "--json", "--follow", "zzzzzzzzzz"},
		{"logs", "-f", "--json", "zzzzzzzzzz"},
	} {
		res := e.run(args...)
		lines := streamLines(t, s, strings.Join(args, " "), res.stdout)
		if res.code == 0 || len(lines) != 1 || lines[0]["error"] == nil {
			t.Errorf("%v: exit %d, want one error line:\n%s", args, res.code, res.stdout)
		}
	}
}
