package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/agent/tools"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/host"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestSchemasGolden(t *testing.T) {
	got, err := json.MarshalIndent(tools.Definitions(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "schemas.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("tool schemas changed; if deliberate, run go test -run TestSchemasGolden -update\n%s", got)
	}
	// Deterministic from one call to the next.
	again, _ := json.MarshalIndent(tools.Definitions(), "", "  ")
	if !bytes.Equal(append(again, '\n'), got) {
		t.Fatal("schemas are not deterministic")
	}
}

func newEnv(t *testing.T) (*tools.Env, string) {
	dir := t.TempDir()
	sb, err := host.New().Start(context.Background(), sandbox.Spec{
		RunID: "abcdefghij", Workspace: dir, StateDir: filepath.Join(t.TempDir(), "state"),
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, Network: sandbox.NetworkNone,
	})
	if err != nil {
		t.Fatalf("start host sandbox: %v", err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return &tools.Env{Runner: sb.Runner(), WorkDir: sb.WorkDir(), SpillDir: t.TempDir()}, sb.WorkDir()
}

func call(t *testing.T, env *tools.Env, name string, args any) tools.Result {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, _ := json.Marshal(args)
		raw = string(b)
	}
	r, err := tools.Call(context.Background(), env, name, raw)
	if err != nil {
		t.Fatalf("%s: harness error: %v", name, err)
	}
	return r
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadFileNumberedOffsetLimit(t *testing.T) {
	env, dir := newEnv(t)
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		b.WriteString("line" + string(rune('0'+i%10)) + "\n")
	}
	write(t, dir, "a.txt", b.String())
	r := call(t, env, "read_file", map[string]any{"path": "a.txt"})
	if r.Kind != tools.KindOK || !strings.HasPrefix(r.Output, "     1\tline1\n") || strings.Contains(r.Output, "use offset") {
		t.Fatalf("whole read: %+v", r)
	}
	r = call(t, env, "read_file", map[string]any{"path": "a.txt", "offset": "3", "limit": 2})
	want := "     3\tline3\n     4\tline4\n(lines 3-4 of 10; use offset and limit to read more)\n"
	if r.Output != want {
		t.Fatalf("got %q want %q", r.Output, want)
	}
	r = call(t, env, "read_file", map[string]any{"path": "a.txt", "offset": 11})
	if r.Kind != tools.KindFailed {
		t.Fatalf("offset past end: %+v", r)
	}
	r = call(t, env, "read_file", map[string]any{"path": "missing.txt"})
	if r.Kind != tools.KindFailed || !strings.Contains(r.Output, "not_found") {
		t.Fatalf("missing: %+v", r)
	}
	write(t, dir, "bin", "a\x00b")
	if r = call(t, env, "read_file", map[string]any{"path": "bin"}); r.Kind != tools.KindFailed || !strings.Contains(r.Output, "binary") {
		t.Fatalf("binary: %+v", r)
	}
}

func TestReadFileSpill(t *testing.T) {
	env, _ := newEnv(t)
	os.WriteFile(filepath.Join(env.SpillDir, "tool-0001.txt"), []byte("a\nb\n"), 0o644)
	r := call(t, env, "read_file", map[string]any{"path": tools.SpillPrefix + "tool-0001.txt", "offset": 2})
	if r.Output != "     2\tb\n(lines 2-2 of 2; use offset and limit to read more)\n" {
		t.Fatalf("%q", r.Output)
	}
	// A spill name cannot reach any other host file.
	for _, bad := range []string{"../../etc/passwd", "/etc/passwd", "..", "a/b"} {
		r = call(t, env, "read_file", map[string]any{"path": tools.SpillPrefix + bad})
		if r.Kind != tools.KindFailed {
			t.Fatalf("%s: %+v", bad, r)
		}
	}
}

func TestWriteAndEditFile(t *testing.T) {
	env, dir := newEnv(t)
	r := call(t, env, "write_file", map[string]any{"path": "pkg/x.go", "content": "package x\n\nfunc A() {}\nfunc A() {}\n"})
	if r.Kind != tools.KindOK || len(r.Changed) != 1 || !strings.Contains(r.Output, "created") {
		t.Fatalf("%+v", r)
	}
	r = call(t, env, "edit_file", map[string]any{"path": "pkg/x.go", "old_string": "func A() {}", "new_string": "func B() {}"})
	if r.Kind != tools.KindFailed || !strings.Contains(r.Output, "more than once") {
		t.Fatalf("not unique: %+v", r)
	}
	r = call(t, env, "edit_file", map[string]any{"path": "pkg/x.go", "old_string": "nope", "new_string": "x"})
	if r.Kind != tools.KindFailed || !strings.Contains(r.Output, "not found") {
		t.Fatalf("no match: %+v", r)
	}
	r = call(t, env, "edit_file", map[string]any{"path": "pkg/x.go", "old_string": "\nfunc A() {}\nfunc A", "new_string": "\nfunc A() {}\nfunc B"})
	if r.Kind != tools.KindOK || read(t, dir, "pkg/x.go") != "package x\n\nfunc A() {}\nfunc B() {}\n" {
		t.Fatalf("%+v %q", r, read(t, dir, "pkg/x.go"))
	}
	// Text copied with read_file's line numbers still matches.
	r = call(t, env, "edit_file", map[string]any{"path": "pkg/x.go", "old_string": "     3\tfunc A() {}\n     4\tfunc B() {}", "new_string": "     3\tfunc A() {}\n     4\tfunc C() {}"})
	if r.Kind != tools.KindOK || read(t, dir, "pkg/x.go") != "package x\n\nfunc A() {}\nfunc C() {}\n" {
		t.Fatalf("%+v %q", r, read(t, dir, "pkg/x.go"))
	}
	r = call(t, env, "write_file", map[string]any{"path": "../escape.txt", "content": "x"})
	if r.Kind != tools.KindFailed {
		t.Fatalf("escape: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.txt")); err == nil {
		t.Fatal("write escaped the workspace")
	}
}

func TestWriteFileKeepsMode(t *testing.T) {
	env, dir := newEnv(t)
	write(t, dir, "run.sh", "#!/bin/sh\necho 1\n")
	os.Chmod(filepath.Join(dir, "run.sh"), 0o755)
	if r := call(t, env, "write_file", map[string]any{"path": "run.sh", "content": "#!/bin/sh\necho 2\n"}); r.Kind != tools.KindOK {
		t.Fatalf("%+v", r)
	}
	if r := call(t, env, "bash", map[string]any{"command": "./run.sh"}); r.ExitCode != 0 || !strings.HasPrefix(r.Output, "2\n") {
		t.Fatalf("%+v", r)
	}
}

func TestApplyEditsAllOrNothing(t *testing.T) {
	env, dir := newEnv(t)
	write(t, dir, "a.txt", "alpha\nbeta\n")
	write(t, dir, "b.txt", "gamma\n")
	r := call(t, env, "apply_edits", map[string]any{"edits": []map[string]string{
		{"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"},
		{"path": "b.txt", "old_string": "missing", "new_string": "x"},
	}})
	if r.Kind != tools.KindFailed || !strings.Contains(r.Output, "edit 2 (b.txt)") || !strings.Contains(r.Output, "no file was changed") {
		t.Fatalf("%+v", r)
	}
	if read(t, dir, "a.txt") != "alpha\nbeta\n" {
		t.Fatal("a failed batch changed a file")
	}
	r = call(t, env, "apply_edits", map[string]any{"edits": []map[string]string{
		{"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"},
		{"path": "a.txt", "old_string": "ALPHA\nbeta", "new_string": "ALPHA\nBETA"},
		{"path": "b.txt", "old_string": "gamma", "new_string": "GAMMA"},
	}})
	if r.Kind != tools.KindOK || len(r.Changed) != 2 {
		t.Fatalf("%+v", r)
	}
	if read(t, dir, "a.txt") != "ALPHA\nBETA\n" || read(t, dir, "b.txt") != "GAMMA\n" {
		t.Fatal("edits not applied")
	}
	// An array sent as a JSON string is accepted.
	r = call(t, env, "apply_edits", `{"edits":"[{\"path\":\"b.txt\",\"old_string\":\"GAMMA\",\"new_string\":\"g\"}]"}`)
	if r.Kind != tools.KindOK || read(t, dir, "b.txt") != "g\n" {
		t.Fatalf("%+v", r)
	}
}

func TestListDirAndGrep(t *testing.T) {
	env, dir := newEnv(t)
	write(t, dir, "a.go", "package a\n// TODO one\n")
	write(t, dir, "sub/b.go", "package b\n// todo two\n")
	write(t, dir, "sub/c.txt", "TODO three\n")
	r := call(t, env, "list_dir", map[string]any{})
	if r.Output != "a.go  (22 bytes)\nsub/\n" {
		t.Fatalf("%q", r.Output)
	}
	r = call(t, env, "list_dir", map[string]any{"recursive": "true"})
	if !strings.Contains(r.Output, "sub/b.go") {
		t.Fatalf("%q", r.Output)
	}
	r = call(t, env, "grep", map[string]any{"pattern": "todo", "glob": "*.go", "ignore_case": true})
	if r.Output != "a.go:2: // TODO one\nsub/b.go:2: // todo two\n" {
		t.Fatalf("%q", r.Output)
	}
	r = call(t, env, "grep", map[string]any{"pattern": "("})
	if r.Kind != tools.KindBadArguments {
		t.Fatalf("%+v", r)
	}
}

func TestBash(t *testing.T) {
	env, dir := newEnv(t)
	write(t, dir, "f.txt", "hello\n")
	r := call(t, env, "bash", map[string]any{"command": "cat f.txt; echo err >&2; exit 3"})
	if r.ExitCode != 3 || !strings.Contains(r.Output, "hello\n") || !strings.Contains(r.Output, "err\n") || !strings.HasSuffix(r.Output, "[exit code 3]") {
		t.Fatalf("%+v", r)
	}
	r = call(t, env, "bash", map[string]any{"command": "sleep 30", "timeout": "1"})
	if !strings.Contains(r.Output, "timed out after 1s") {
		t.Fatalf("%+v", r)
	}
}

// A background process the command started does not outlive it.
func TestBashBackgroundEnds(t *testing.T) {
	env, dir := newEnv(t)
	r := call(t, env, "bash", map[string]any{"command": "(sleep 1; echo late > late.txt) & echo started"})
	if r.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "late.txt")); err == nil {
		t.Fatal("a background process outlived its command")
	}
}

func TestFinishAndUnknown(t *testing.T) {
	env, _ := newEnv(t)
	r := call(t, env, "finish", map[string]any{"summary": "done"})
	if !r.Finish || r.Summary != "done" {
		t.Fatalf("%+v", r)
	}
	for _, name := range []string{"functions.finish", "Finish", "attempt_completion"} {
		if r = call(t, env, name, map[string]any{"summary": "x"}); !r.Finish {
			t.Fatalf("%s: %+v", name, r)
		}
	}
	r = call(t, env, "launch_rockets", map[string]any{})
	if r.Kind != tools.KindUnknownTool || !strings.Contains(r.Output, "read_file") {
		t.Fatalf("%+v", r)
	}
}
