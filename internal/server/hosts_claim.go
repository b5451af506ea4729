package server

// hosts_claim.go: claims, heartbeats and host loss. A claim takes the
// run's lease on the host's behalf (HostLeases.HoldFor) and records it in
// host_claims; only the host's heartbeats renew it. A lease whose expiry
// passed is the host's loss: the monitor ends the claim, journals the run
// interrupted with reason host_lost and queues it again (a resume: same
// id, a new attempt), and the next claim takes the lease with a greater
// token. Every write of a run by a host is fenced: its claim must be open
// and its token the lease's current one (fence).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/supervisor"
)

// claim is one open row of host_claims.
type claim struct {
	Run, Host string
	Token     int64
	ClaimedAt time.Time
}

// openClaims are the claims not ended, of host (all hosts: "").
func (h *Hosts) openClaims(ctx context.Context, host string) ([]claim, error) {
	q := `SELECT run_id, token, host_id, claimed_at FROM host_claims WHERE ended_at IS NULL`
	args := []any{}
	if host != "" {
		q += ` AND host_id = $1`
		args = append(args, host)
	}
	rows, err := h.DB.Read.QueryContext(ctx, q+` ORDER BY claimed_at`, args...)
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	defer rows.Close()
	var out []claim
	for rows.Next() {
		var c claim
		var at int64
		if err := rows.Scan(&c.Run, &c.Token, &c.Host, &at); err != nil {
			return nil, fmt.Errorf("claims: %w", err)
		}
		c.ClaimedAt = time.UnixMicro(at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// endClaim ends an open claim; false if it was not open (ended already).
func (h *Hosts) endClaim(ctx context.Context, c claim, outcome string) (bool, error) {
	res, err := h.DB.Write.ExecContext(ctx, `UPDATE host_claims SET ended_at = $1, outcome = $2
		WHERE run_id = $3 AND token = $4 AND ended_at IS NULL`, micros(time.Now()), outcome, c.Run, c.Token)
	if err != nil {
		return false, fmt.Errorf("end claim of %s: %w", c.Run, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// fence refuses a write of run id by host unless the host's claim with
// token is open and token is the run's lease's current one, held for the
// host. The caller holds lockRun(id).
//
// The two reads go side by side (each on a connection of its own): every
// call of a host's run pays for the fence, and on PostgreSQL a read is a
// round trip.
func (h *Hosts) fence(ctx context.Context, host *Host, id string, token int64) error {
	type lease struct {
		held bool
		err  error
	}
	leased := make(chan lease, 1)
	go func() {
		held, err := h.Leases.HeldBy(ctx, id, token, holder(host.ID))
		leased <- lease{held, err}
	}()
	var n int
	err := h.DB.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM host_claims
		WHERE run_id = $1 AND token = $2 AND host_id = $3 AND ended_at IS NULL`, id, token, host.ID).Scan(&n)
	l := <-leased
	if err == nil {
		err = l.err
	}
	if err != nil {
		return fmt.Errorf("fence %s: %w", id, err)
	}
	if n != 1 || !l.held {
		return catalog.LeaseLost.New("host %s does not hold run %s with token %d", host.ID, id, token)
	}
	return nil
}

// ClaimRequest is the body of POST /v1/hosts/claim.
type ClaimRequest struct {
	// Backends are the sandbox backends the host can start.
	Backends []string `json:"backends"`
	// Agents are the agent profiles whose CLI is on the host's PATH (nil:
	// it does not say, and is given runs of any).
	Agents []string `json:"agents"`
	// WaitMS is how long to wait for a run (at most MaxClaimWait).
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// Claim is the answer of POST /v1/hosts/claim: a run to execute, or none
// (Run nil) when the wait ended first.
type Claim struct {
	Run *run.Run `json:"run,omitempty"`
	// Token is the lease's fencing token: every write of the run carries it.
	Token   int64  `json:"token,omitempty"`
	Project string `json:"project,omitempty"`
	// Note and Ended are the last resume's handoff (supervisor.Handoff).
	Note  string `json:"note,omitempty"`
	Ended string `json:"ended,omitempty"`
	// LeaseTTLMS is how long the lease outlives the host's last heartbeat.
	LeaseTTLMS int64 `json:"lease_ttl_ms"`
	// SealedEnv are the server's values of the run's variables (its
	// provider keys), sealed to the host's key for this run and token
	// (hosts_seal.go); absent: the run needs none.
	SealedEnv []byte `json:"sealed_env,omitempty"`
}

// MaxClaimWait bounds a claim's long poll.
const MaxClaimWait = 25 * time.Second

// claimWait waits up to wait for a run host can execute and claims it:
// the queue hands it the oldest run that fits the host (its backends,
// labels and free slots), and the claim takes the run's lease.
func (h *Hosts) claimWait(ctx context.Context, host *Host, in ClaimRequest) (Claim, error) {
	none := Claim{LeaseTTLMS: h.TTL.Milliseconds()}
	wait := min(time.Duration(in.WaitMS)*time.Millisecond, MaxClaimWait)
	began := time.Now()
	if err := h.seen(ctx, host.ID); err != nil {
		return Claim{}, err
	}
	if h.Queue == nil {
		return Claim{}, catalog.Internal.New("the server has no dispatch queue")
	}
	if err := h.heard(ctx, host, in.Agents); err != nil {
		return Claim{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		var open int
		if err := h.DB.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM host_claims WHERE host_id = $1 AND ended_at IS NULL`,
			host.ID).Scan(&open); err != nil {
			return Claim{}, fmt.Errorf("claim: %w", err)
		}
		if open >= host.Slots {
			// No free slot: a release or a loss frees one; look again
			// every second until the wait ends.
			t := time.NewTimer(min(time.Until(began.Add(wait)), time.Second))
			select {
			case <-wctx.Done():
			case <-t.C:
			}
			t.Stop()
			if wctx.Err() != nil {
				return none, ctx.Err()
			}
			continue
		}
		o, done, err := h.Queue.Next(wctx, func(o queue.Offer) bool { return fits(host, in.Backends, in.Agents, o) })
		if err != nil {
			return none, ctx.Err()
		}
		// A host whose heartbeats stopped while it waited here (stopped,
		// cut off) is not given a run it could not start (it was heard
		// from just now at first).
		if time.Since(began) > time.Second && !h.alive(ctx, host.ID) {
			done(false)
			return none, nil
		}
		unlock := h.lockRun(o.Run)
		c, ok, err := h.take(ctx, host, o.Run)
		unlock()
		done(ok)
		if ok {
			h.Metrics.HostClaimed(time.Since(began))
		}
		if err != nil || ok {
			return c, err
		}
	}
}

// fits reports whether a host with backends and agents can execute the
// run offered: it has the run's backend and all its labels, the CLI of
// its agent profile (agents nil: it did not say), and a sealing key if
// the run needs values.
func fits(host *Host, backends, agents []string, o queue.Offer) bool {
	if !slices.Contains(backends, o.Backend) || o.Sealed && host.sealKey == nil {
		return false
	}
	if o.Agent != "" && agents != nil && !slices.Contains(agents, o.Agent) {
		return false
	}
	for k, v := range o.Labels {
		if hv, ok := host.Labels[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// seen records that host was heard from now, unless this server recorded
// it within seenEvery: a host's claims come one after another (each run it
// is given is followed by its next claim, on the path of that run to its
// agent's start), and what reads the time (alive, the hosts counted up)
// looks a TTL back.
func (h *Hosts) seen(ctx context.Context, host string) error {
	now := time.Now()
	if t, ok := h.seenAt.Load(host); ok && now.Sub(t.(time.Time)) < h.seenEvery() {
		return nil
	}
	if _, err := h.DB.Write.ExecContext(ctx, `UPDATE hosts SET last_seen = $1 WHERE id = $2`, micros(now), host); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	h.seenAt.Store(host, now)
	return nil
}

// seenEvery is how often a host's being seen is written: a tenth of the
// TTL, at most a second.
func (h *Hosts) seenEvery() time.Duration { return min(h.TTL/10, time.Second) }

// alive reports whether host was heard from within the TTL.
func (h *Hosts) alive(ctx context.Context, host string) bool {
	var n int
	err := h.DB.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM hosts WHERE id = $1 AND last_seen > $2`,
		host, micros(time.Now().Add(-h.TTL))).Scan(&n)
	return err == nil && n == 1
}

// take takes run id's lease for host and records the claim, if the run is
// still queued and unclaimed. The caller holds lockRun(id).
func (h *Hosts) take(ctx context.Context, host *Host, id string) (Claim, bool, error) {
	token, ok, err := h.Leases.HoldFor(ctx, id, holder(host.ID))
	if err != nil || !ok {
		return Claim{}, false, err
	}
	drop := func() { _ = h.Leases.DropFor(context.WithoutCancel(ctx), id, token, holder(host.ID)) }
	r, err := h.Home.Store.Get(ctx, id)
	if err != nil || !supervisor.Unclaimed(r) || r.CancelRequested {
		drop()
		return Claim{}, false, nil
	}
	// A claim of the run still open has an expired lease (the lease was
	// free to take) that the monitor has not ended yet; its host never
	// started the run (it is unclaimed): it ends here, as lost.
	if err := h.endStale(ctx, id); err != nil {
		drop()
		return Claim{}, false, err
	}
	sealed, err := h.sealFor(host, r, token)
	if errors.Is(err, errNoSealKey) {
		drop()
		return Claim{}, false, nil
	}
	if err != nil {
		drop()
		return Claim{}, false, err
	}
	ho, err := supervisor.ResumeHandoff(ctx, h.Home.Store, id)
	if err == nil {
		_, err = h.DB.Write.ExecContext(ctx, `INSERT INTO host_claims (run_id, token, host_id, claimed_at) VALUES ($1, $2, $3, $4)`,
			id, token, host.ID, micros(time.Now()))
	}
	if err != nil {
		drop()
		return Claim{}, false, fmt.Errorf("claim %s: %w", id, err)
	}
	project, _ := h.Projects.project(r.Repo)
	h.log().Info("run claimed", "run", id, "host", host.ID, "name", host.Name, "token", token, "queued_for", time.Since(r.UpdatedAt).String())
	return Claim{Run: forHost(r), Token: token, Project: project, Note: ho.Note, Ended: ho.Ended, LeaseTTLMS: h.TTL.Milliseconds(),
		SealedEnv: sealed}, true, nil
}

// endStale ends the open claims of run id, whose leases expired.
func (h *Hosts) endStale(ctx context.Context, id string) error {
	_, err := h.DB.Write.ExecContext(ctx, `UPDATE host_claims SET ended_at = $1, outcome = 'lost' WHERE run_id = $2 AND ended_at IS NULL`,
		micros(time.Now()), id)
	if err != nil {
		return fmt.Errorf("claim %s: %w", id, err)
	}
	return nil
}

// forHost is r as a host sees it: without the server's paths.
func forHost(r *run.Run) *run.Run {
	c := *r
	c.Repo, c.Patch = "", ""
	if r.Result != nil {
		res := *r.Result
		res.Patch = ""
		c.Result = &res
	}
	return &c
}

// HeldRun is a run a host says it executes, with its claim's token.
type HeldRun struct {
	ID    string `json:"id"`
	Token int64  `json:"token"`
}

// HeartbeatRequest is the body of POST /v1/hosts/heartbeat.
type HeartbeatRequest struct {
	Runs []HeldRun `json:"runs"`
	// WaitMS is how long the answer may wait for a cancel of one of Runs
	// (at most half the lease TTL; hosts_cancel.go).
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// Heartbeat is its answer: the runs the host lost (it drops them), the
// runs whose cancel was asked for, and the lease TTL.
type Heartbeat struct {
	Lost       []string `json:"lost"`
	Cancel     []string `json:"cancel"`
	LeaseTTLMS int64    `json:"lease_ttl_ms"`
}

// heartbeat renews the leases of host's runs. A run the host reports
// whose lease it no longer holds is lost to it; a claim it no longer
// reports (a host restarted) is given up after one TTL, so that a claim
// answer still on its way is not.
func (h *Hosts) heartbeat(ctx context.Context, host *Host, in HeartbeatRequest) (Heartbeat, error) {
	out := Heartbeat{Lost: []string{}, Cancel: []string{}, LeaseTTLMS: h.TTL.Milliseconds()}
	if err := h.seen(ctx, host.ID); err != nil {
		return out, err
	}
	renewed, err := h.Leases.RenewHolder(ctx, holder(host.ID))
	if err != nil {
		return out, err
	}
	open, err := h.openClaims(ctx, host.ID)
	if err != nil {
		return out, err
	}
	reported := map[string]bool{}
	for _, hr := range in.Runs {
		reported[hr.ID] = true
		ok := renewed[hr.ID] == hr.Token && slices.ContainsFunc(open, func(c claim) bool { return c.Run == hr.ID && c.Token == hr.Token })
		if !ok {
			out.Lost = append(out.Lost, hr.ID)
			continue
		}
		if h.cancelAsked(ctx, hr.ID) {
			out.Cancel = append(out.Cancel, hr.ID)
		}
	}
	for _, c := range open {
		if !reported[c.Run] && time.Since(c.ClaimedAt) > h.TTL {
			h.lose(ctx, c, "its host no longer executes it")
		}
	}
	return out, nil
}

// Watch ends the claims whose leases expired (their hosts stopped
// heartbeating) until ctx ends, looking every TTL/4.
func (h *Hosts) Watch(ctx context.Context) {
	t := time.NewTicker(max(h.TTL/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		h.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Hosts) sweep(ctx context.Context) {
	claims, err := h.openClaims(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			h.log().Error("host claims", "error", err.Error())
		}
		return
	}
	for _, c := range claims {
		held, err := h.Leases.HeldBy(ctx, c.Run, c.Token, holder(c.Host))
		if err == nil && !held {
			h.lose(ctx, c, "its host stopped heartbeating")
		}
	}
}

// Remote reports whether a host executes run id now: the run's host is
// watched here, and a reconcile leaves the run alone.
func (h *Hosts) Remote(ctx context.Context, id string) bool {
	var n int
	err := h.DB.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM host_claims WHERE run_id = $1 AND ended_at IS NULL`, id).Scan(&n)
	return err == nil && n > 0
}

// lose ends claim c, whose host lost the run (why says how): the lease is
// dropped, an active run is journaled interrupted (host_lost) and queued
// again as a resume, for another host; a run whose cancel was asked for
// ends cancelled. A run that ended meanwhile is left as it is.
func (h *Hosts) lose(ctx context.Context, c claim, why string) {
	ctx = context.WithoutCancel(ctx)
	defer h.lockRun(c.Run)()
	if ok, err := h.endClaim(ctx, c, "lost"); err != nil || !ok {
		return
	}
	_ = h.Leases.DropFor(ctx, c.Run, c.Token, holder(c.Host))
	h.Metrics.HostLost()
	h.log().Warn("host lost its run", "run", c.Run, "host", c.Host, "token", c.Token, "why", why)
	h.requeue(ctx, c.Run, run.ReasonHostLost, "the agent host executing the run was lost ("+why+"); it is queued again")
}

// requeue queues run id again for another host, in one state change
// (reason, msg) from where the lost host left it, active or interrupted:
// its last attempt ends, its supervisor is forgotten, and the journal
// tells the next attempt how the run ended (an EventResume, written
// first, so that a claim never finds the run queued without it). A run
// whose cancel was asked for ends cancelled instead; an ended one is left.
func (h *Hosts) requeue(ctx context.Context, id string, reason run.Reason, msg string) {
	st := h.Home.Store
	for range 3 {
		r, err := st.Get(ctx, id)
		if err != nil || !(r.State.Active() || r.State == run.StateInterrupted) {
			return
		}
		if r.CancelRequested {
			_, _ = st.Transition(ctx, id, []run.State{r.State}, run.StateCancelled, run.ReasonCancelled, "cancelled; "+msg)
			return
		}
		ended := fmt.Sprintf("%s (%s): %s", r.State, reason, msg)
		if _, err := st.AppendEvent(ctx, id, run.NewEvent(run.EventResume, "queued again", supervisor.Handoff{Ended: ended})); err != nil {
			h.log().Error("requeue", "run", id, "error", err.Error())
			return
		}
		now := time.Now().UTC()
		nr, err := st.TransitionWith(ctx, id, []run.State{r.State}, run.StateQueued, reason, msg, func(r *run.Run) error {
			r.Supervisor = nil
			if a := r.LastAttempt(); a != nil && a.FinishedAt == nil {
				a.FinishedAt, a.Outcome, a.Message = &now, reason, msg
			}
			return nil
		})
		if errors.Is(err, run.ErrConflict) {
			continue // it moved meanwhile (a reconcile): look again
		}
		if err != nil {
			h.log().Error("requeue", "run", id, "error", err.Error())
			return
		}
		h.enqueue(ctx, nr)
		return
	}
}

// release ends host's claim of run id with token once the host is done
// with the run: its lease is dropped; a run still active (the host gave
// it up without ending it) is queued again.
func (h *Hosts) release(ctx context.Context, host *Host, id string, token int64) error {
	ctx = context.WithoutCancel(ctx)
	defer h.lockRun(id)()
	c := claim{Run: id, Host: host.ID, Token: token}
	ok, err := h.endClaim(ctx, c, "released")
	if err != nil {
		return err
	}
	if !ok {
		return catalog.LeaseLost.New("host %s does not hold run %s with token %d", host.ID, id, token)
	}
	_ = h.Leases.DropFor(ctx, id, token, holder(host.ID))
	h.requeue(ctx, id, run.ReasonInterrupted, "the agent host gave the run up before it ended; it is queued again")
	return nil
}
