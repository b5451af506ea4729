package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

func TestListTableNewestFirst(t *testing.T) {
	h := newTestHome(t)
	old := h.add(func(r *run.Run) {
		r.CreatedAt = time.Now().Add(-3 * time.Hour)
		r.Task = "Old task\nwith a second line"
		r.State, r.Reason = run.StateFailed, run.ReasonChecksFailed
	})
	mid := h.add(func(r *run.Run) {
		r.CreatedAt = time.Now().Add(-5 * time.Minute)
		r.Commit = strings.Repeat("c", 40)
		r.Repo = filepath.Join(h.env["HOME"], "src", "app")
	})
	code, out, stderr := h.exec("list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header + 2 rows:\n%s", out)
	}
	for i, col := range []string{"ID", "STATUS", "AGE", "DISK", "REPO", "BRANCH", "TASK"} {
		if f := strings.Fields(lines[0]); f[i] != col {
			t.Fatalf("header %q", lines[0])
		}
	}
	if !strings.HasPrefix(lines[1], mid.ID) || !strings.HasPrefix(lines[2], old.ID) {
		t.Errorf("not newest first:\n%s", out)
	}
	for _, want := range []string{"5m ago", "~/src/app", mid.Branch, "succeeded"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	for _, want := range []string{"3h ago", "failed (checks_failed)", "Old task …"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("row %q lacks %q", lines[2], want)
		}
	}
	// A run that exported nothing has no branch to show.
	if strings.Contains(lines[2], old.Branch) {
		t.Errorf("row shows a branch that was never created: %q", lines[2])
	}
	// Aligned: the TASK column starts at the same place on every line.
	at := strings.Index(lines[0], "TASK")
	if !strings.HasPrefix(lines[1][at:], "Fix the flaky") || !strings.HasPrefix(lines[2][at:], "Old task") {
		t.Errorf("columns not aligned:\n%s", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("colour in output that is not a terminal")
	}
}

func TestListJSON(t *testing.T) {
	h := newTestHome(t)
	a := h.add(func(r *run.Run) { r.Verdict = &run.Verdict{Value: "accept", At: time.Now()} })
	code, out, _ := h.exec("list", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if string(doc["broken"]) != "[]" {
		t.Errorf("broken = %s, want []", doc["broken"])
	}
	var runs []map[string]any
	if err := json.Unmarshal(doc["runs"], &runs); err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %s", err, doc["runs"])
	}
	for _, k := range []string{"id", "status", "reason", "created_at", "repo", "branch", "agent", "attempts", "verdict", "task"} {
		if _, ok := runs[0][k]; !ok {
			t.Errorf("field %q missing: %v", k, runs[0])
		}
	}
	if v, _ := runs[0]["verdict"].(map[string]any); runs[0]["id"] != a.ID || v["value"] != "accept" {
		t.Errorf("%v", runs[0])
	}
}

func TestListEmpty(t *testing.T) {
	h := newTestHome(t)
	code, out, _ := h.exec("list")
	if code != 0 || !strings.Contains(out, "no runs yet") {
		t.Errorf("exit %d: %q", code, out)
	}
	code, out, _ = h.exec("list", "--json")
	if code != 0 || strings.Join(strings.Fields(out), "") != `{"runs":[],"broken":[]}` {
		t.Errorf("exit %d: %q", code, out)
	}
}

func TestListDamagedRunAffectsOnlyItself(t *testing.T) {
	h := newTestHome(t)
	good := h.add(nil)
	bad := h.add(nil)
	if err := os.WriteFile(h.st.L.RunJSON(bad.ID), []byte(`{"id": "`+bad.ID+`", "status": `), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := h.exec("list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, good.ID) || strings.Contains(out, bad.ID) {
		t.Errorf("stdout:\n%s", out)
	}
	if !strings.Contains(stderr, bad.ID) || !strings.Contains(stderr, "damaged") {
		t.Errorf("the broken run is not named on stderr:\n%s", stderr)
	}
	code, out, _ = h.exec("list", "--json")
	var doc listOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if len(doc.Runs) != 1 || doc.Runs[0].ID != good.ID {
		t.Errorf("runs: %+v", doc.Runs)
	}
	if len(doc.Broken) != 1 || doc.Broken[0].ID != bad.ID || doc.Broken[0].Err == "" {
		t.Errorf("broken: %+v", doc.Broken)
	}
}

func TestListStatusFilter(t *testing.T) {
	h := newTestHome(t)
	ok := h.add(nil)
	failed := h.add(func(r *run.Run) { r.State, r.Reason = run.StateFailed, run.ReasonAgentFailed })
	cancelled := h.add(func(r *run.Run) { r.State, r.Reason = run.StateCancelled, run.ReasonCancelled })
	app, out, _ := h.app()
	app.JSON = true
	o := &listOptions{Statuses: []string{"failed,Cancelled"}, Now: time.Now()}
	if err := runList(context.Background(), o, app); err != nil {
		t.Fatal(err)
	}
	var doc listOutput
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range doc.Runs {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, " ") != cancelled.ID+" "+failed.ID {
		t.Errorf("got %v; want cancelled %s, failed %s (not %s)", ids, cancelled.ID, failed.ID, ok.ID)
	}
	code, stdout, _ := h.exec("list", "--status", "done", "--json")
	if code != 2 || jsonErr(t, stdout)["code"] != "bad_status" {
		t.Errorf("bad status: exit %d %s", code, stdout)
	}
	code, _, stderr := h.exec("list", "--status", "succeeded", "--status", "runing")
	if code != 2 || !strings.Contains(stderr, `"runing"`) {
		t.Errorf("bad status: exit %d %s", code, stderr)
	}
}

func TestListRepoFilter(t *testing.T) {
	h := newTestHome(t)
	root := t.TempDir()
	repoA, repoB := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{filepath.Join(repoA, ".git"), filepath.Join(repoA, "sub", "dir"), filepath.Join(repoB, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := h.add(func(r *run.Run) { r.Repo = repoA })
	h.add(func(r *run.Run) { r.Repo = repoB })
	code, out, _ := h.exec("list", "--repo", filepath.Join(repoA, "sub", "dir"), "--json")
	var doc listOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if len(doc.Runs) != 1 || doc.Runs[0].ID != a.ID {
		t.Errorf("runs: %+v", doc.Runs)
	}
	// A path that does not exist is a mistake, unless runs were made there
	// (a repository since removed).
	code, out, _ = h.exec("list", "--repo", filepath.Join(root, "gone"), "--json")
	if code != 2 || !strings.Contains(out, "repo_missing") {
		t.Errorf("exit %d: %s", code, out)
	}
	if err := os.RemoveAll(repoB); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = h.exec("list", "--repo", repoB, "-q"); code != 0 || len(strings.Fields(out)) != 1 {
		t.Errorf("runs of a removed repository: exit %d %q", code, out)
	}
}

func TestListArgs(t *testing.T) {
	h := newTestHome(t)
	if code, _, _ := h.exec("list", "extra"); code != 2 {
		t.Errorf("extra argument: exit %d, want 2", code)
	}
	if code, _, _ := h.exec("list", "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}
}

// BenchmarkList1000 lists a real home of 1,000 runs through the command
// (store read, reconcile, table), as `agentrun list` does.
func BenchmarkList1000(b *testing.B) {
	h := newTestHome(b)
	for i := range 1000 {
		h.add(func(r *run.Run) {
			r.State = run.States[5+i%4]
			r.Task = strings.Repeat("A task of some length. ", 20)
			r.Attempts = []run.Attempt{{N: 1, StartedAt: time.Now(), Checks: []run.CheckResult{{Name: "unit", Passed: true}}}}
		})
	}
	for _, asJSON := range []bool{false, true} {
		name := "table"
		if asJSON {
			name = "json"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				app, out, _ := h.app()
				app.JSON = asJSON
				if err := runList(context.Background(), &listOptions{Now: time.Now()}, app); err != nil {
					b.Fatal(err)
				}
				if out.Len() == 0 {
					b.Fatal("no output")
				}
			}
		})
	}
}

func TestListFilters(t *testing.T) {
	h := newTestHome(t)
	old := h.add(func(r *run.Run) {
		r.CreatedAt = time.Now().Add(-72 * time.Hour)
		r.Agent.Name = "claude"
		r.Verdict = &run.Verdict{Value: "accept", At: time.Now()}
	})
	mid := h.add(func(r *run.Run) { r.CreatedAt = time.Now().Add(-2 * time.Hour); r.Agent.Name = "builtin" })
	newest := h.add(func(r *run.Run) {
		r.CreatedAt = time.Now().Add(-time.Minute)
		r.Verdict = &run.Verdict{Value: "reject", At: time.Now()}
	})
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"-q"}, []string{newest.ID, mid.ID, old.ID}},
		{[]string{"-q", "--limit", "2"}, []string{newest.ID, mid.ID}},
		{[]string{"-q", "--since", "24h"}, []string{newest.ID, mid.ID}},
		{[]string{"-q", "--since", "1d"}, []string{newest.ID, mid.ID}},
		{[]string{"-q", "--since", time.Now().Add(-30 * time.Minute).UTC().Format(time.RFC3339)}, []string{newest.ID}},
		{[]string{"-q", "--agent", "claude"}, []string{old.ID}},
		{[]string{"-q", "--verdict", "none"}, []string{mid.ID}},
		{[]string{"-q", "--verdict", "reject"}, []string{newest.ID}},
		{[]string{"-q", "--verdict", "accept", "--agent", "builtin"}, nil},
	}
	for _, c := range cases {
		code, out, errb := h.exec(append([]string{"list"}, c.args...)...)
		if got := strings.Fields(out); code != 0 || strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("list %v: exit %d %q %s, want %v", c.args, code, out, errb, c.want)
		}
	}
	code, js, _ := h.exec("list", "--json", "--limit", "1")
	var doc listOutput
	if err := json.Unmarshal([]byte(js), &doc); err != nil || code != 0 || len(doc.Runs) != 1 || doc.Runs[0].ID != newest.ID {
		t.Fatalf("exit %d %v %s", code, err, js)
	}
	for _, bad := range [][]string{{"--limit", "-1"}, {"--since", "yesterday"}, {"--verdict", "maybe"}, {"--repo", "/nonexistent/agentrun"}} {
		if code, _, _ := h.exec(append([]string{"list"}, bad...)...); code != 2 {
			t.Errorf("list %v: exit %d, want 2", bad, code)
		}
	}
}
