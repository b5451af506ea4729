package users

import (
	"fmt"
	"time"

	"github.com/agentrun/agentrun/internal/run"
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

// Decide decides on a run (newRun: a submit; else a resume) under l
// with usage u: the first limit reached refuses; else the admission may
// spend the least of the per-run maximum and what the day and the month
// have left.
func Decide(u Usage, l Limits, p Periods, newRun bool) (*Admission, error) {
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
