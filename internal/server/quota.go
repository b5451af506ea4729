package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/users"
)

// Quotas at submit and resume. A run is admitted in one transaction of
// the users store (users.Store.Admit) that reads the user's ledger and
// writes the admission: concurrent submits never both take the last
// slot. The admission's budget (the least of the per-run maximum and
// what the day and month have left) becomes the run's --max-tokens and
// --max-cost, so that a run crossing the user's quota ends
// budget_exceeded, and resume admits it again with what is left then.

// quotaError is the catalog error of a refused admission.
func quotaError(err error) error {
	var ex *users.Exceeded
	if !errors.As(err, &ex) {
		return usersError(err)
	}
	resets := "it frees when one of your active runs ends"
	if !ex.Resets.IsZero() {
		resets = "it resets at " + ex.Resets.Format(time.RFC3339) + " (in " + time.Until(ex.Resets).Round(time.Minute).String() + ")"
	}
	return catalog.QuotaExceeded.New("the quota %s is %s and %s are used; %s", ex.Limit, ex.Value, ex.Used, resets)
}

// overMax is the error of a request past a per-run maximum.
func overMax(name, asked, max string) error {
	return catalog.QuotaExceeded.New("the run asks for %s %s, over the per-run maximum %s", name, asked, max).
		WithFix("ask for at most %s (or leave it out: the maximum applies), or ask an admin to raise %s", max, name)
}

// limitsOf are the user's effective limits.
func (s *Server) limitsOf(ctx context.Context, userID string) (users.Limits, error) {
	u, err := s.o.Users.User(ctx, userID)
	if err != nil {
		return users.Limits{}, usersError(err)
	}
	return s.o.Quota.Over(u.Limits), nil
}

// perRun applies the per-run maximums of l to a submit: a value over one
// is refused, an unset one takes it.
func perRun(spec *SubmitRequest, l users.Limits, defaultAttempts int) error {
	if l.MaxTimeout != nil && *l.MaxTimeout > 0 {
		max := l.MaxTimeout.D()
		if spec.Timeout == "" {
			spec.Timeout = max.String()
		} else if d, err := time.ParseDuration(spec.Timeout); err != nil {
			return catalog.BadDuration.New("timeout %q", spec.Timeout)
		} else if d == 0 || d > max {
			return overMax("timeout", spec.Timeout, max.String())
		}
	}
	if n := users.I(l.MaxAttempts); n > 0 {
		switch {
		case spec.Attempts > n:
			return overMax("attempts", fmt.Sprint(spec.Attempts), fmt.Sprint(n))
		case spec.Attempts == 0 && int64(defaultAttempts) > n:
			spec.Attempts = n
		}
	}
	if n := users.I(l.MaxTokens); n > 0 && spec.MaxTokens != nil && (*spec.MaxTokens == 0 || *spec.MaxTokens > n) {
		return overMax("max_tokens", fmt.Sprint(*spec.MaxTokens), fmt.Sprint(n))
	}
	if c := users.F(l.MaxCost); c > 0 && spec.MaxCost != nil && (*spec.MaxCost == 0 || *spec.MaxCost > c) {
		return overMax("max_cost", fmt.Sprint(*spec.MaxCost), fmt.Sprint(c))
	}
	return nil
}

// admitSubmit admits a submit under its user's quotas and sets the run's
// budget (nil: the server keeps no users).
func (s *Server) admitSubmit(ctx context.Context, spec *SubmitRequest) (*users.Admission, error) {
	p, ok := PrincipalFrom(ctx)
	if s.o.Users == nil || !ok {
		return nil, nil
	}
	l, err := s.limitsOf(ctx, p.UserID)
	if err != nil {
		return nil, err
	}
	if err := perRun(spec, l, s.o.Attempts); err != nil {
		return nil, err
	}
	adm, err := s.o.Users.Admit(ctx, users.Request{UserID: p.UserID}, l)
	if err != nil {
		return nil, quotaError(err)
	}
	if adm.MaxTokens > 0 && (spec.MaxTokens == nil || *spec.MaxTokens == 0 || *spec.MaxTokens > adm.MaxTokens) {
		spec.MaxTokens = &adm.MaxTokens
	}
	if adm.MaxCost > 0 && (spec.MaxCost == nil || *spec.MaxCost == 0 || *spec.MaxCost > adm.MaxCost) {
		spec.MaxCost = &adm.MaxCost
	}
	return adm, nil
}

// admitResume admits the resume of run id under its submitter's quotas
// (the caller's for a run without one) and sets the resumed run's
// budget: what it spent so far and what the quotas leave. A run that
// cannot be resumed is left to resume to refuse.
func (s *Server) admitResume(ctx context.Context, id string, body *ResumeRequest) (*users.Admission, string, error) {
	p, ok := PrincipalFrom(ctx)
	if s.o.Users == nil || s.o.Store == nil || !ok {
		return nil, "", nil
	}
	full, err := s.o.Store.Resolve(ctx, id)
	if err != nil {
		return nil, "", nil
	}
	r, err := s.o.Store.Get(ctx, full)
	if err != nil || !r.State.Resumable() {
		return nil, "", nil
	}
	owner := p.UserID
	if r.SubmittedBy != nil {
		owner = r.SubmittedBy.ID
	}
	l, err := s.limitsOf(ctx, owner)
	if err != nil {
		return nil, "", err
	}
	spent := r.Usage
	if n := users.I(l.MaxTokens); n > 0 {
		if spent.Total() >= n {
			return nil, "", overMax("max_tokens", fmt.Sprintf("more than the %d tokens it has used", spent.Total()), fmt.Sprint(n))
		}
		left := n - spent.Total()
		l.MaxTokens = &left
	}
	if c := users.F(l.MaxCost); c > 0 {
		used := costOf(spent)
		if used >= c {
			return nil, "", overMax("max_cost", fmt.Sprintf("more than the $%.4f it has used", used), fmt.Sprint(c))
		}
		left := c - used
		l.MaxCost = &left
	}
	adm, err := s.o.Users.Admit(ctx, users.Request{UserID: owner, RunID: full, Spent: spent}, l)
	if err != nil {
		return nil, "", quotaError(err)
	}
	if r.Gateway != nil {
		if adm.MaxTokens > 0 {
			t := spent.Total() + adm.MaxTokens
			if body.MaxTokens == nil || *body.MaxTokens == 0 || *body.MaxTokens > t {
				body.MaxTokens = &t
			}
		}
		if adm.MaxCost > 0 {
			c := costOf(spent) + adm.MaxCost
			if body.MaxCost == nil || *body.MaxCost == 0 || *body.MaxCost > c {
				body.MaxCost = &c
			}
		}
	}
	return adm, full, nil
}

func costOf(u *run.Usage) float64 {
	if u == nil {
		return 0
	}
	return u.CostUSD
}

// settle binds an admission to the run it made, or releases it when no
// run was made (or queued again).
func (s *Server) settle(ctx context.Context, adm *users.Admission, runID string) {
	if adm == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	var err error
	if runID != "" {
		err = s.o.Users.Bind(ctx, adm.ID, runID)
	} else {
		err = s.o.Users.Release(ctx, adm.ID)
	}
	if err != nil {
		s.o.Log.Error("quota ledger", "admission", adm.ID, "run", runID, "error", err.Error())
	}
}
