package sqlusers_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/store/sqlstore"
	"github.com/agentrun/agentrun/internal/users"
	"github.com/agentrun/agentrun/internal/users/sqlusers"
)

var ctx = context.Background()

func open(t *testing.T, url string) (*sqlusers.Store, *sqldb.DB) {
	t.Helper()
	db, err := sqldb.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return sqlusers.New(db), db
}

func n(v int64) *int64 { return &v }

// altered is secret with each of its last k letters replaced by another
// (a fixed replacement was the letter already there one time in 32).
func altered(secret string, k int) string {
	b := []byte(secret)
	for i := len(b) - k; i < len(b); i++ {
		if b[i] == 'a' {
			b[i] = 'b'
		} else {
			b[i] = 'a'
		}
	}
	return string(b)
}

// Tokens: the secret has the agr_ form, only its hash is stored, and
// Authenticate tells expired, revoked and disabled apart.
func TestTokens(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		st, db := open(t, newURL(t))
		u, err := st.AddUser(ctx, "alice", users.Member)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddUser(ctx, "alice", users.Viewer); !errors.Is(err, users.ErrExists) {
			t.Fatalf("second alice: %v", err)
		}
		secret, tok, err := st.CreateToken(ctx, u, "laptop", []string{users.ScopeRunsRead}, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, users.TokenPrefix) || !users.LooksLikeToken(secret) || users.LooksLikeToken(altered(secret, 1)) {
			t.Fatalf("token %q", secret)
		}
		var stored int
		if err := db.Read().QueryRowContext(ctx, `SELECT COUNT(*) FROM api_tokens WHERE hash = $1 OR hint = $1 OR name = $1`, secret).Scan(&stored); err != nil || stored != 0 {
			t.Fatalf("the secret is stored: %d %v", stored, err)
		}
		got, gt, err := st.Authenticate(ctx, secret)
		if err != nil || got.Name != "alice" || gt.ID != tok.ID {
			t.Fatalf("authenticate: %v %v", got, err)
		}
		if _, _, err := st.Authenticate(ctx, altered(secret, 2)); !errors.Is(err, users.ErrBadToken) {
			t.Fatalf("a wrong token: %v", err)
		}
		if err := st.SetExpiry(ctx, tok.ID, time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Authenticate(ctx, secret); !errors.Is(err, users.ErrExpired) {
			t.Fatalf("expired: %v", err)
		}
		s2, t2, _ := st.CreateToken(ctx, u, "ci", []string{users.ScopeRunsWrite}, time.Time{})
		if _, err := st.RevokeToken(ctx, t2.ID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Authenticate(ctx, s2); !errors.Is(err, users.ErrRevoked) {
			t.Fatalf("revoked: %v", err)
		}
		s3, _, _ := st.CreateToken(ctx, u, "other", []string{users.ScopeRunsRead}, time.Time{})
		if _, err := st.SetDisabled(ctx, "alice", true); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Authenticate(ctx, s3); !errors.Is(err, users.ErrDisabled) {
			t.Fatalf("disabled: %v", err)
		}
		if _, _, err := st.CreateToken(ctx, u, "x", []string{"runs:delete"}, time.Time{}); !errors.Is(err, users.ErrBadName) {
			t.Fatalf("unknown scope: %v", err)
		}
	})
}

// Admit is exact: 50 admissions racing for the last concurrent slot, and
// for the last run of the day, admit one each.
func TestAdmitRaces(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		st, _ := open(t, newURL(t))
		u, _ := st.AddUser(ctx, "bob", users.Member)
		race := func(l users.Limits) int {
			var wg sync.WaitGroup
			var mu sync.Mutex
			admitted := 0
			for range 50 {
				wg.Go(func() {
					_, err := st.Admit(ctx, users.Request{UserID: u.ID}, l)
					var ex *users.Exceeded
					switch {
					case err == nil:
						mu.Lock()
						admitted++
						mu.Unlock()
					case !errors.As(err, &ex):
						t.Errorf("admit: %v", err)
					}
				})
			}
			wg.Wait()
			return admitted
		}
		if got := race(users.Limits{ConcurrentRuns: n(3)}); got != 3 {
			t.Fatalf("3 concurrent slots: %d admitted", got)
		}
		// The pending admissions hold their slots: none is left.
		if _, err := st.Admit(ctx, users.Request{UserID: u.ID}, users.Limits{ConcurrentRuns: n(3)}); err == nil {
			t.Fatal("a fourth admitted")
		}
		if got := race(users.Limits{RunsPerDay: n(5)}); got != 2 {
			t.Fatalf("runs per day 5 with 3 today: %d admitted", got)
		}
		us, _ := st.Usage(ctx, u.ID, time.Now())
		if us.RunsToday != 5 || us.ConcurrentRuns != 5 {
			t.Fatalf("usage %+v", us)
		}
	})
}

// Admissions under limits that count nothing (no quota reads the usage:
// the ledger is not summed for them) are recorded all the same, keep
// their per-run maximum, and count against a quota set later; a user
// who is gone is still refused.
func TestAdmitUncounted(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		st, _ := open(t, newURL(t))
		u, _ := st.AddUser(ctx, "dave", users.Member)
		for range 3 {
			a, err := st.Admit(ctx, users.Request{UserID: u.ID}, users.Limits{MaxTokens: n(100)})
			if err != nil || a.MaxTokens != 100 || a.ID == "" {
				t.Fatalf("uncounted: %+v %v", a, err)
			}
		}
		if _, err := st.Admit(ctx, users.Request{UserID: u.ID}, users.Limits{ConcurrentRuns: n(3)}); err == nil {
			t.Fatal("a fourth admitted past 3 concurrent runs")
		}
		us, _ := st.Usage(ctx, u.ID, time.Now())
		if us.RunsToday != 3 || us.ConcurrentRuns != 3 {
			t.Fatalf("usage %+v", us)
		}
		if _, err := st.Admit(ctx, users.Request{UserID: "u_nobody"}, users.Limits{}); !errors.Is(err, users.ErrNotFound) {
			t.Fatalf("a user who is not there: %v", err)
		}
	})
}

// A run's budget is what the day has left, reserved while it is active;
// once it ends, what it spent counts and the rest comes back; a resume
// counts only what it adds.
func TestBudgetsAndReservations(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		st, db := open(t, newURL(t))
		rs := sqlstore.New(db)
		u, _ := st.AddUser(ctx, "carol", users.Member)
		l := users.Limits{TokensPerDay: n(1000), MaxTokens: n(600)}
		a1, err := st.Admit(ctx, users.Request{UserID: u.ID}, l)
		if err != nil || a1.MaxTokens != 600 {
			t.Fatalf("first: %+v %v", a1, err)
		}
		r := &run.Run{ID: "abcd000001", State: run.StateRunning, Repo: "/r"}
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := st.Bind(ctx, a1.ID, r.ID); err != nil {
			t.Fatal(err)
		}
		a2, err := st.Admit(ctx, users.Request{UserID: u.ID}, l)
		if err != nil || a2.MaxTokens != 400 {
			t.Fatalf("second (600 reserved): %+v %v", a2, err)
		}
		if _, err := st.Admit(ctx, users.Request{UserID: u.ID}, l); err == nil {
			t.Fatal("third admitted with the day reserved")
		} else if ex := new(users.Exceeded); !errors.As(err, &ex) || ex.Limit != "tokens_per_day" || ex.Resets.IsZero() {
			t.Fatalf("third: %v", err)
		}
		if err := st.Release(ctx, a2.ID); err != nil {
			t.Fatal(err)
		}
		// The run ends having spent 250: 750 are left.
		if _, err := rs.Update(ctx, r.ID, func(r *run.Run) error {
			r.State, r.Usage = run.StateFailed, &run.Usage{PromptTokens: 200, CompletionTokens: 50}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		us, _ := st.Usage(ctx, u.ID, time.Now())
		if us.TokensToday != 250 || us.ConcurrentRuns != 0 || us.ReservedTokens != 0 {
			t.Fatalf("usage after the run: %+v", us)
		}
		// Its resume may spend 600 more (per run: 600 - 250 = 350 is the
		// server's business; here the limits say 600).
		a3, err := st.Admit(ctx, users.Request{UserID: u.ID, RunID: r.ID, Spent: r.Usage}, l)
		if err != nil || a3.MaxTokens != 600 {
			t.Fatalf("resume: %+v %v", a3, err)
		}
		if err := st.Bind(ctx, a3.ID, r.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Update(ctx, r.ID, func(r *run.Run) error {
			r.State, r.Usage = run.StateSucceeded, &run.Usage{PromptTokens: 300, CompletionTokens: 50}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		us, _ = st.Usage(ctx, u.ID, time.Now())
		if us.TokensToday != 350 || us.RunsToday != 1 {
			t.Fatalf("usage after the resume: %+v", us)
		}
	})
}
