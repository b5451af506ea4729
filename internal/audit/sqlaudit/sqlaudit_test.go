package sqlaudit_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/audit/sqlaudit"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/store/sqlstore"
	"github.com/agentrun/agentrun/internal/store/storetest"
)

var ctx = context.Background()

func open(tb testing.TB, url string) *sqldb.DB {
	tb.Helper()
	db, err := sqldb.Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func newKey(t *testing.T) *audit.Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return audit.NewKey(priv)
}

// verify exports l and verifies the export with k.
func verify(t *testing.T, l audit.Log, k *audit.Key) audit.Report {
	t.Helper()
	var buf bytes.Buffer
	if err := audit.Export(ctx, l, &buf); err != nil {
		t.Fatal(err)
	}
	es, cps, err := audit.ReadExport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return audit.Verify(es, cps, []ed25519.PublicKey{k.Public()})
}

// TestConcurrentAppendsOneChain: writers on two connections to one
// database (as two server processes would be) append at once, and seal
// while they do; the trail is one chain, every entry once, and every
// checkpoint verifies.
func TestConcurrentAppendsOneChain(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		url := newURL(t)
		logs := []*sqlaudit.Log{sqlaudit.New(open(t, url)), sqlaudit.New(open(t, url))}
		k := newKey(t)
		const writers, each = 20, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers*each+writers)
		for w := range writers {
			wg.Go(func() {
				l := logs[w%2]
				for i := range each {
					if _, err := l.Append(ctx, audit.Entry{Actor: fmt.Sprintf("w%d", w), Action: "submit", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
						errs <- err
					}
					if i%3 == 0 {
						if _, _, err := l.Seal(ctx, k); err != nil {
							errs <- err
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		rep := verify(t, logs[0], k)
		if !rep.OK || rep.Entries != writers*each || rep.Checkpoints == 0 {
			t.Fatalf("%+v %+v", rep, rep.Problem)
		}
		head, sealed, err := logs[1].Head(ctx)
		if err != nil || head != writers*each || sealed != rep.Sealed {
			t.Fatalf("head %d sealed %d (%v), report %+v", head, sealed, err, rep)
		}
		// Sealing a sealed head writes nothing.
		if _, _, err := logs[0].Seal(ctx, k); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := logs[0].Seal(ctx, k); ok || err != nil {
			t.Fatalf("a second seal of one head: %v %v", ok, err)
		}
	})
}

// TestRunEventsInTheTrail: the run store with the trail's hook passes the
// store's conformance suite, and every event it wrote is an entry of one
// valid chain, "run.<type>" of the run.
func TestRunEventsInTheTrail(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		k := newKey(t)
		var entries atomic.Int64
		var opened atomic.Bool
		t.Run("suite", func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) run.Store {
				db := open(t, newURL(t))
				opened.Store(true)
				l := sqlaudit.New(db)
				// Checked when the subtest ends, before its database closes.
				t.Cleanup(func() {
					if _, _, err := l.Seal(ctx, k); err != nil {
						t.Fatal(err)
					}
					rep := verify(t, l, k)
					if !rep.OK {
						t.Fatalf("%+v", rep.Problem)
					}
					entries.Add(int64(rep.Entries))
				})
				return sqlstore.New(db).WithEventHook(l.RunEvents("server"))
			})
		})
		if !opened.Load() {
			t.Skip("no database was opened: the suite's subtests were skipped")
		}
		if entries.Load() == 0 {
			t.Fatal("the conformance suite's events left no audit entries")
		}
	})
}

// TestEventAndEntryTogether: an event and its entry commit together; a
// transition refused (its fn fails) leaves neither, and an entry that
// cannot be written refuses the event.
func TestEventAndEntryTogether(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		db := open(t, newURL(t))
		l := sqlaudit.New(db)
		st := sqlstore.New(db).WithEventHook(l.RunEvents("server"))
		r := &run.Run{ID: run.NewID(), State: run.StateQueued}
		if err := st.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(ctx, r.ID, []run.State{run.StateQueued}, run.StatePreparing, "", "go"); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		if _, err := st.TransitionWith(ctx, r.ID, []run.State{run.StatePreparing}, run.StateRunning, "", "", func(*run.Run) error { return boom }); !errors.Is(err, boom) {
			t.Fatal(err)
		}
		es, err := l.Entries(ctx, audit.Query{Run: r.ID})
		if err != nil || len(es) != 1 || es[0].Action != "run.state" || es[0].Actor != "server" {
			t.Fatalf("entries %+v, %v", es, err)
		}
		failing := sqlstore.New(db).WithEventHook(func(context.Context, *sql.Tx, string, run.Event) error { return boom })
		if _, err := failing.AppendEvent(ctx, r.ID, run.NewEvent(run.EventWarning, "w", nil)); !errors.Is(err, boom) {
			t.Fatalf("append with a failing hook: %v", err)
		}
		evs, err := st.Events(ctx, r.ID, 0)
		if err != nil || len(evs) != 1 {
			t.Fatalf("events %+v, %v: want the state event alone", evs, err)
		}
	})
}
