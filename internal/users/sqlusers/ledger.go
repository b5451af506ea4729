package sqlusers

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/users"
)

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
}, userID string, p users.Periods) ([]ledgerRow, error) {
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
func tally(rows []ledgerRow, p users.Periods, now time.Time) users.Usage {
	var u users.Usage
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
func (s *Store) Usage(ctx context.Context, userID string, now time.Time) (users.Usage, error) {
	p := users.PeriodsAt(now)
	rows, err := ledger(ctx, s.db.Read(), userID, p)
	if err != nil {
		return users.Usage{}, err
	}
	return tally(rows, p, now), nil
}

// Admit checks the user's quotas under limits and, if they allow it,
// records the admission, in one transaction.
func (s *Store) Admit(ctx context.Context, req users.Request, l users.Limits) (*users.Admission, error) {
	var adm *users.Admission
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		adm = nil
		// The user's row is the lock that serialises the user's
		// admissions (SQLite's write transactions are serial anyway).
		// Limits that count nothing need neither the lock nor the
		// ledger's sum: reading this month's ledger for every submit
		// grows with the runs, and would hold the user's other submits
		// behind the lock meanwhile.
		counted := countsUsage(l)
		lock := ""
		if counted {
			lock = s.db.ForUpdate()
		}
		var id string
		if err := tx.QueryRowContext(ctx, `SELECT id FROM users WHERE id = $1`+lock, req.UserID).Scan(&id); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("user %s: %w", req.UserID, users.ErrNotFound)
			}
			return err
		}
		now := time.Now()
		p := users.PeriodsAt(now)
		var u users.Usage
		if counted {
			rows, err := ledger(ctx, tx, req.UserID, p)
			if err != nil {
				return err
			}
			u = tally(rows, p, now)
		}
		a, err := users.Decide(u, l, p, req.RunID == "")
		if err != nil {
			return err
		}
		a.ID = users.NewID("q_")
		adm = a
		return s.record(ctx, tx, req, a, now)
	})
	return adm, err
}

// countsUsage reports whether one of l's quotas is decided on what the
// user used (users.Decide reads the usage for those only).
func countsUsage(l users.Limits) bool {
	return users.I(l.ConcurrentRuns) > 0 || users.I(l.RunsPerDay) > 0 || users.I(l.TokensPerDay) > 0 ||
		users.I(l.TokensPerMonth) > 0 || users.F(l.CostPerDay) > 0 || users.F(l.CostPerMonth) > 0
}

// record writes the admission; a resume first fixes what the run's
// previous admission spent, so that it stops reading the run's usage.
func (s *Store) record(ctx context.Context, tx *sql.Tx, req users.Request, a *users.Admission, now time.Time) error {
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
