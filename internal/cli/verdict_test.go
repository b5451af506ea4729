package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
)

func TestVerdictRecordsAndJournals(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	app, out, _ := h.app()
	now := time.Now().UTC().Truncate(time.Second)
	o := &verdictOptions{ID: r.ID, Value: "reject", Note: "wrong fix", By: "alice", Now: now}
	if err := runVerdict(context.Background(), o, app); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "rejected: wrong fix") {
		t.Errorf("%q", out.String())
	}
	code, js, _ := h.exec("verdict", r.ID, "accept", "--json")
	if code != 0 {
		t.Fatalf("exit %d %s", code, js)
	}
	var doc struct {
		ID      string      `json:"id"`
		Verdict run.Verdict `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || doc.Verdict.Value != "accept" || doc.Verdict.By != "reviewer" {
		t.Fatalf("%v %s", err, js)
	}
	got, err := h.st.Get(context.Background(), r.ID)
	if err != nil || got.Verdict == nil || got.Verdict.Value != "accept" {
		t.Fatalf("stored verdict: %v %+v", err, got.Verdict)
	}
	evs, err := h.st.Events(context.Background(), r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var journal []string
	for _, e := range evs {
		if e.Type == run.EventVerdict {
			var v run.Verdict
			if err := json.Unmarshal(e.Data, &v); err != nil {
				t.Fatal(err)
			}
			journal = append(journal, e.Message+"/"+v.Note)
		}
	}
	if strings.Join(journal, ",") != "reject/wrong fix,accept (was reject)/" {
		t.Errorf("journal: %v", journal)
	}
}

func TestVerdictBadInput(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(nil)
	for _, args := range [][]string{
		{"verdict", r.ID, "maybe"},
		{"verdict", r.ID, "ACCEPT"},
		{"verdict", r.ID},
		{"verdict", r.ID, "accept", "extra"},
	} {
		code, out, _ := h.exec(append(args, "--json")...)
		if code != 2 {
			t.Errorf("%v: exit %d", args, code)
			continue
		}
		if c := jsonErr(t, out)["code"]; c != "bad_verdict" && c != "usage" {
			t.Errorf("%v: code %v", args, c)
		}
	}
	if got, _ := h.st.Get(context.Background(), r.ID); got.Verdict != nil {
		t.Error("a bad verdict was recorded")
	}
	active := h.add(func(r *run.Run) { r.State, r.Reason = run.StateRunning, "" })
	h.holdSupervisor(active.ID)
	code, out, _ := h.exec("verdict", active.ID, "accept", "--json")
	if code != 2 || jsonErr(t, out)["code"] != "not_finished" {
		t.Errorf("active run: exit %d %s", code, out)
	}
}

func TestVerdictBadIDs(t *testing.T) {
	badIDCases(t, newTestHome(t), "verdict", "accept")
}
