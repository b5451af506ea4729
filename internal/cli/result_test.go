package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

func TestResultHuman(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	app, out, _ := h.app()
	if err := runResult(context.Background(), &resultOptions{ID: r.ID, Patch: true, Now: time.Now()}, app); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"status    succeeded", r.Branch, r.Commit, "1 file, +2 -0", "unit pass", "#1 1m0s, #2 1m0s",
		"duration  3m0s", "1200 prompt", "auth.go | 2 ++", "refused by export (1", "bin/tool", "special file",
		"review: git -C /src/project log -p bbbbbbbbbbbb.." + r.Branch, "diff --git a/auth.go b/auth.go\n+fixed\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("result lacks %q:\n%s", want, s)
		}
	}
}

func TestResultJSON(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	code, out, _ := h.exec("result", r.ID, "--patch", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "status", "reason", "branch", "commit", "patch", "run_dir", "files_changed",
		"insertions", "deletions", "diffstat", "checks", "attempts", "duration", "usage", "refused", "patch_text"} {
		if _, ok := got[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	if got["patch"] != h.st.L.Patch(r.ID) || got["duration"] != "3m0s" || got["patch_text"] != "diff --git a/auth.go b/auth.go\n+fixed\n" {
		t.Errorf("%v", got)
	}
	// Without --patch there is no patch_text.
	_, out, _ = h.exec("result", r.ID, "--json")
	if strings.Contains(out, "patch_text") {
		t.Error("patch_text without --patch")
	}
}

func TestResultNothingExported(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateFailed, run.ReasonNoChanges })
	code, out, _ := h.exec("result", r.ID, "--json")
	var got resultOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if got.Branch != "" || got.Commit != "" || got.Patch != "" || got.Checks == nil || got.Refused == nil {
		t.Errorf("%+v", got)
	}
	code, hout, _ := h.exec("result", r.ID)
	if code != 0 || !strings.Contains(hout, "none (nothing was exported)") {
		t.Errorf("exit %d:\n%s", code, hout)
	}
}

func TestResultPointsAtFailedCheck(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) {
		r.State, r.Reason, r.Commit, r.Result = run.StateFailed, run.ReasonChecksFailed, "", nil
		r.Attempts = r.Attempts[:1]
	})
	code, out, _ := h.exec("result", r.ID)
	if code != 0 || !strings.Contains(out, "why check unit failed: agentrun logs "+r.ID+" --check unit --attempt 1") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = h.exec("status", r.ID)
	if code != 0 || !strings.Contains(out, "agentrun resume "+r.ID) {
		t.Errorf("status of a failed run does not suggest resume:\n%s", out)
	}
}

func TestResultOfActiveRun(t *testing.T) {
	h := newTestHome(t)
	r := h.add(func(r *run.Run) { r.State, r.Reason = run.StateRunning, "" })
	h.holdSupervisor(r.ID)
	code, out, _ := h.exec("result", r.ID, "--json")
	if code != 2 || jsonErr(t, out)["code"] != "not_finished" {
		t.Errorf("exit %d: %s", code, out)
	}
}

func TestResultBadIDs(t *testing.T) {
	badIDCases(t, newTestHome(t), "result")
}
