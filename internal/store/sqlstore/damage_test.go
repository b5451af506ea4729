package sqlstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// TestDamagedRecords: a record that cannot be read affects only its own
// run. Get and Update report run.ErrCorrupt naming it, List reports it
// beside the readable runs, and Delete removes it.
func TestDamagedRecords(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		url := newURL(t)
		s := openStore(t, url)
		raw, err := sqldb.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		good := mustCreate(t, s, run.NewID())
		damage := map[string]string{
			"not JSON":      `{"id": `,
			"another run":   `{"id":"aaaaaaaaaa","status":"queued"}`,
			"unknown state": `{"id":"%s","status":"exploded"}`,
		}
		var broken []string
		for what, doc := range damage {
			r := mustCreate(t, s, run.NewID())
			broken = append(broken, r.ID)
			doc = strings.ReplaceAll(doc, "%s", r.ID)
			if _, err := raw.Write().ExecContext(ctx, `UPDATE runs SET doc = $2 WHERE id = $1`, r.ID, doc); err != nil {
				t.Fatal(err)
			}
			_, err := s.Get(ctx, r.ID)
			if !errors.Is(err, run.ErrCorrupt) || !strings.Contains(err.Error(), r.ID) {
				t.Errorf("Get of a record with %s: %v; want ErrCorrupt naming %s", what, err, r.ID)
			}
			if _, err := s.Update(ctx, r.ID, func(*run.Run) error { t.Error("fn called on a damaged record"); return nil }); !errors.Is(err, run.ErrCorrupt) {
				t.Errorf("Update of a record with %s: %v; want ErrCorrupt", what, err)
			}
		}
		runs, bad, err := s.List(ctx, run.Filter{})
		if err != nil || len(runs) != 1 || runs[0].ID != good.ID || len(bad) != len(damage) {
			t.Fatalf("List = %d runs, broken %v, %v; want %s and %d broken", len(runs), bad, err, good.ID, len(damage))
		}
		for _, b := range bad {
			if !strings.Contains(b.Err, "damaged") {
				t.Errorf("broken %s: %q", b.ID, b.Err)
			}
		}
		for _, id := range broken {
			if err := s.Delete(ctx, id); err != nil {
				t.Fatalf("Delete of a damaged run: %v", err)
			}
		}
		if _, bad, _ := s.List(ctx, run.Filter{}); len(bad) != 0 {
			t.Fatalf("after Delete: broken %v", bad)
		}

		// A damaged event is reported, not skipped.
		if _, err := s.AppendEvent(ctx, good.ID, run.NewEvent(run.EventWarning, "x", nil)); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Write().ExecContext(ctx, `UPDATE run_events SET doc = 'x' WHERE run_id = $1`, good.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Events(ctx, good.ID, 0); !errors.Is(err, run.ErrCorrupt) {
			t.Fatalf("Events with a damaged event: %v; want ErrCorrupt", err)
		}
	})
}

func mustCreate(t testing.TB, s run.Store, id string) *run.Run {
	t.Helper()
	r := &run.Run{ID: id, State: run.StateQueued, Task: "t", Repo: "/src/app", MaxAttempts: 1}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r
}
