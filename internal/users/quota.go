package users

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
)

// Limits are quotas; an unset field inherits (an override) or does not
// limit (the effective limits). 0 set means "no limit" too, so that an
// admin can lift a default for one user.
type Limits struct {
	ConcurrentRuns *int64   `json:"concurrent_runs,omitempty"`
	RunsPerDay     *int64   `json:"runs_per_day,omitempty"`
	TokensPerDay   *int64   `json:"tokens_per_day,omitempty"`
	TokensPerMonth *int64   `json:"tokens_per_month,omitempty"`
	CostPerDay     *float64 `json:"cost_per_day,omitempty"`
	CostPerMonth   *float64 `json:"cost_per_month,omitempty"`
	// Per-run maximums.
	MaxTimeout  *run.Duration `json:"max_timeout,omitempty"`
	MaxAttempts *int64        `json:"max_attempts,omitempty"`
	MaxTokens   *int64        `json:"max_tokens,omitempty"`
	MaxCost     *float64      `json:"max_cost,omitempty"`
}

// Over is l with o's set fields in place of l's.
func (l Limits) Over(o Limits) Limits {
	pick := func(a, b *int64) *int64 {
		if b != nil {
			return b
		}
		return a
	}
	pickF := func(a, b *float64) *float64 {
		if b != nil {
			return b
		}
		return a
	}
	out := Limits{
		ConcurrentRuns: pick(l.ConcurrentRuns, o.ConcurrentRuns), RunsPerDay: pick(l.RunsPerDay, o.RunsPerDay),
		TokensPerDay: pick(l.TokensPerDay, o.TokensPerDay), TokensPerMonth: pick(l.TokensPerMonth, o.TokensPerMonth),
		CostPerDay: pickF(l.CostPerDay, o.CostPerDay), CostPerMonth: pickF(l.CostPerMonth, o.CostPerMonth),
		MaxTimeout: l.MaxTimeout, MaxAttempts: pick(l.MaxAttempts, o.MaxAttempts),
		MaxTokens: pick(l.MaxTokens, o.MaxTokens), MaxCost: pickF(l.MaxCost, o.MaxCost),
	}
	if o.MaxTimeout != nil {
		out.MaxTimeout = o.MaxTimeout
	}
	return out
}

// I is the limit n, 0 when unset.
func I(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}

// F is the limit f, 0 when unset.
func F(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

// Usage is what counts against a user's quotas now. Tokens and cost
// include what the runs still active may yet spend of their budgets
// (reserved).
type Usage struct {
	ConcurrentRuns int64   `json:"concurrent_runs"`
	RunsToday      int64   `json:"runs_today"`
	TokensToday    int64   `json:"tokens_today"`
	TokensMonth    int64   `json:"tokens_month"`
	CostToday      float64 `json:"cost_today"`
	CostMonth      float64 `json:"cost_month"`
	// ReservedTokens and ReservedCost are the active runs' unspent
	// budgets, counted in the figures above.
	ReservedTokens int64   `json:"reserved_tokens"`
	ReservedCost   float64 `json:"reserved_cost"`
}

// Periods are the quota periods: UTC days and months.
type Periods struct {
	Day, Month         time.Time // when the current one began
	NextDay, NextMonth time.Time // when it resets
}

// PeriodsAt are the periods that hold now.
func PeriodsAt(now time.Time) Periods {
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return Periods{Day: day, Month: month, NextDay: day.AddDate(0, 0, 1), NextMonth: month.AddDate(0, 1, 0)}
}

// Exceeded is a refused admission: which limit, its value, the usage and
// when it resets (zero: when one of the user's runs ends).
type Exceeded struct {
	Limit  string
	Value  string
	Used   string
	Resets time.Time
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("quota %s (%s) reached: %s used", e.Limit, e.Value, e.Used)
}

// Request asks to admit a run: a new one (RunID "") or a resume of RunID,
// whose usage so far is Spent.
type Request struct {
	UserID string
	RunID  string
	Spent  *run.Usage
}

// Admission is an admitted run's share: what it may spend (0: no bound
// from quotas). Bind it to the new run, or Release it if the run was not
// made.
type Admission struct {
	ID        string
	MaxTokens int64
	MaxCost   float64
}

// pendingTTL is how long an admission waits for its run: one older that
// has none is of a submit that died half way, and counts no more.
const pendingTTL = 10 * time.Minute

// ledgerRow is one admission with its run's state and usage.
type ledgerRow struct {
	id, kind          string
	runID, state, doc sql.NullString
	at                int64
	baseTokens        int64
	baseCost          float64
	budgetTokens      int64
	budgetCost        float64
	usedTokens        sql.NullInt64
	usedCost          sql.NullFloat64
}

// spent is what the admission has used.
func (r ledgerRow) spent() (int64, float64) {
	if r.usedTokens.Valid {
		return r.usedTokens.Int64, r.usedCost.Float64
	}
	if !r.doc.Valid {
		return 0, 0
	}
	var rec struct {
		Usage *run.Usage `json:"usage"`
	}
	if json.Unmarshal([]byte(r.doc.String), &rec) != nil || rec.Usage == nil {
		return 0, 0
	}
	return max(0, rec.Usage.Total()-r.baseTokens), max(0, rec.Usage.CostUSD-r.baseCost)
}

// active reports whether the admission's run may still spend: it is the
// run's latest admission and the run is not over (or not made yet).
func (r ledgerRow) active(now time.Time) bool {
	if r.usedTokens.Valid {
		return false
	}
	if !r.runID.Valid {
		return now.Sub(fromMicros(r.at)) < pendingTTL
	}
	return r.state.Valid && run.State(r.state.String).Active()
}

func activeStates() string {
	s := ""
	for _, st := range run.States {
		if st.Active() {
			if s != "" {
				s += ", "
			}
			s += "'" + string(st) + "'"
		}
	}
	return s
}

// ledger reads the user's admissions that count now: this month's, and
// any whose run is still active.
func ledger(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, userID string, p Periods) ([]ledgerRow, error) {
	rows, err := q.QueryContext(ctx, `SELECT l.id, l.kind, l.run_id, r.state, r.doc, l.at, l.base_tokens, l.base_cost,
		l.budget_tokens, l.budget_cost, l.used_tokens, l.used_cost
		FROM quota_ledger l LEFT JOIN runs r ON r.id = l.run_id
		WHERE l.user_id = $1 AND (l.at >= $2 OR (l.used_tokens IS NULL AND (l.run_id IS NULL OR r.state IN (`+activeStates()+`))))`,
		userID, micros(p.Month))
	if err != nil {
		return nil, fmt.Errorf("quota ledger: %w", err)
	}
	defer rows.Close()
	var out []ledgerRow
	for rows.Next() {
		var r ledgerRow
		if err := rows.Scan(&r.id, &r.kind, &r.runID, &r.state, &r.doc, &r.at, &r.baseTokens, &r.baseCost,
			&r.budgetTokens, &r.budgetCost, &r.usedTokens, &r.usedCost); err != nil {
			return nil, fmt.Errorf("quota ledger: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// tally adds the ledger up.
func tally(rows []ledgerRow, p Periods, now time.Time) Usage {
	var u Usage
	for _, r := range rows {
		tok, cost := r.spent()
		if r.active(now) {
			u.ConcurrentRuns++
			if r.budgetTokens > tok {
				u.ReservedTokens += r.budgetTokens - tok
				tok = r.budgetTokens
			}
			if r.budgetCost > cost {
				u.ReservedCost += r.budgetCost - cost
				cost = r.budgetCost
			}
		}
		at := fromMicros(r.at)
		if r.kind == "submit" && !at.Before(p.Day) && (r.runID.Valid || r.active(now)) {
			u.RunsToday++
		}
		if !at.Before(p.Month) {
			u.TokensMonth += tok
			u.CostMonth += cost
		}
		if !at.Before(p.Day) {
			u.TokensToday += tok
			u.CostToday += cost
		}
	}
	return u
}

// Usage is the user's usage now.
func (s *Store) Usage(ctx context.Context, userID string, now time.Time) (Usage, error) {
	p := PeriodsAt(now)
	rows, err := ledger(ctx, s.db.Read(), userID, p)
	if err != nil {
		return Usage{}, err
	}
	return tally(rows, p, now), nil
}

// Admit checks the user's quotas under limits and, if they allow it,
// records the admission, in one transaction.
func (s *Store) Admit(ctx context.Context, req Request, l Limits) (*Admission, error) {
	var adm *Admission
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		adm = nil
		// The user's row is the lock that serialises the user's
		// admissions (SQLite's write transactions are serial anyway).
		var id string
		if err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE id = $1`+s.db.ForUpdate(), req.UserID).Scan(&id); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("user %s: %w", req.UserID, ErrNotFound)
			}
			return err
		}
		now := time.Now()
		p := PeriodsAt(now)
		rows, err := ledger(ctx, tx, req.UserID, p)
		if err != nil {
			return err
		}
		u := tally(rows, p, now)
		a, err := admit(u, l, p, req.RunID == "")
		if err != nil {
			return err
		}
		a.ID = newID("q_")
		adm = a
		return s.record(ctx, tx, req, a, rows, now)
	})
	return adm, err
}

// admit decides: the first limit reached refuses; else the admission may
// spend the least of the per-run maximum and what the day and the month
// have left.
func admit(u Usage, l Limits, p Periods, newRun bool) (*Admission, error) {
	if n := I(l.ConcurrentRuns); n > 0 && u.ConcurrentRuns >= n {
		return nil, &Exceeded{Limit: "concurrent_runs", Value: fmt.Sprint(n), Used: fmt.Sprintf("%d runs active", u.ConcurrentRuns)}
	}
	if n := I(l.RunsPerDay); newRun && n > 0 && u.RunsToday >= n {
		return nil, &Exceeded{Limit: "runs_per_day", Value: fmt.Sprint(n), Used: fmt.Sprintf("%d runs today", u.RunsToday), Resets: p.NextDay}
	}
	a := &Admission{MaxTokens: I(l.MaxTokens), MaxCost: F(l.MaxCost)}
	for _, c := range []struct {
		name  string
		limit int64
		used  int64
		reset time.Time
	}{{"tokens_per_day", I(l.TokensPerDay), u.TokensToday, p.NextDay}, {"tokens_per_month", I(l.TokensPerMonth), u.TokensMonth, p.NextMonth}} {
		if c.limit <= 0 {
			continue
		}
		left := c.limit - c.used
		if left <= 0 {
			return nil, &Exceeded{Limit: c.name, Value: fmt.Sprint(c.limit), Used: fmt.Sprintf("%d tokens (%d reserved by active runs)", c.used, u.ReservedTokens), Resets: c.reset}
		}
		if a.MaxTokens == 0 || left < a.MaxTokens {
			a.MaxTokens = left
		}
	}
	for _, c := range []struct {
		name        string
		limit, used float64
		reset       time.Time
	}{{"cost_per_day", F(l.CostPerDay), u.CostToday, p.NextDay}, {"cost_per_month", F(l.CostPerMonth), u.CostMonth, p.NextMonth}} {
		if c.limit <= 0 {
			continue
		}
		left := c.limit - c.used
		if left <= 0 {
			return nil, &Exceeded{Limit: c.name, Value: fmt.Sprintf("$%g", c.limit), Used: fmt.Sprintf("$%.4f ($%.4f reserved by active runs)", c.used, u.ReservedCost), Resets: c.reset}
		}
		if a.MaxCost == 0 || left < a.MaxCost {
			a.MaxCost = left
		}
	}
	return a, nil
}

// record writes the admission; a resume first fixes what the run's
// previous admission spent, so that it stops reading the run's usage.
func (s *Store) record(ctx context.Context, tx *sql.Tx, req Request, a *Admission, rows []ledgerRow, now time.Time) error {
	// run_id stays NULL until Bind: until the run is made (or queued
	// again), the admission counts as an active run of its own.
	kind, runID := "submit", sql.NullString{}
	var baseT int64
	var baseC float64
	if req.RunID != "" {
		kind = "resume"
		baseT, baseC = req.Spent.Total(), 0
		if req.Spent != nil {
			baseC = req.Spent.CostUSD
		}
		if err := closeAdmissions(ctx, tx, req.RunID, baseT, baseC); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO quota_ledger (id, user_id, run_id, kind, at, base_tokens, base_cost, budget_tokens, budget_cost)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, a.ID, req.UserID, runID, kind, micros(now), baseT, baseC, a.MaxTokens, a.MaxCost)
	if err != nil {
		return fmt.Errorf("quota ledger: %w", err)
	}
	return nil
}

// closeAdmissions fixes the spend of the run's open admission (there is
// at most one) from the run's usage now.
func closeAdmissions(ctx context.Context, tx *sql.Tx, runID string, tokens int64, cost float64) error {
	_, err := tx.ExecContext(ctx, `UPDATE quota_ledger SET used_tokens = CASE WHEN $2 > base_tokens THEN $2 - base_tokens ELSE 0 END,
		used_cost = CASE WHEN $3 > base_cost THEN $3 - base_cost ELSE 0 END
		WHERE run_id = $1 AND used_tokens IS NULL`, runID, tokens, cost)
	if err != nil {
		return fmt.Errorf("quota ledger: %w", err)
	}
	return nil
}

// Bind ties an admission to the run it made.
func (s *Store) Bind(ctx context.Context, admission, runID string) error {
	_, err := s.db.Write().ExecContext(ctx, `UPDATE quota_ledger SET run_id = $2 WHERE id = $1`, admission, runID)
	return err
}

// Release forgets an admission whose run was not made (or not resumed).
// A resume's previous admission stays closed: it spent what it spent.
func (s *Store) Release(ctx context.Context, admission string) error {
	_, err := s.db.Write().ExecContext(ctx, `DELETE FROM quota_ledger WHERE id = $1`, admission)
	return err
}

// DB is the store's database (tests).
func (s *Store) DB() *sqldb.DB { return s.db }
