package server

// hosts_agents.go: which agent CLIs a taker has. A profile's CLI is found
// on the PATH of the machine that runs it: each host says in every claim
// which profiles' CLIs are on its PATH (submit.Installed), and is given
// only runs whose CLI it has; the server's own worker has those on the
// server's PATH. What a host said last is kept with it (the column
// agents), written when it changes.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/submit"
)

// profileOf is the agent profile whose CLI run r's taker runs ("": none).
func profileOf(r *run.Run) string {
	if n := r.Agent.Name; n != agent.BuiltinName && n != agent.CommandName {
		return n
	}
	return ""
}

// heard records the profiles host said it has in a claim, when they
// are not what it said last (agents nil: it does not say, as a host of
// an earlier version does not).
func (h *Hosts) heard(ctx context.Context, host *Host, agents []string) error {
	if agents == nil {
		return nil
	}
	said := slices.Clone(agents)
	slices.Sort(said)
	said = slices.Compact(said)
	if host.Agents != nil && slices.Equal(said, host.Agents) {
		return nil
	}
	b, _ := json.Marshal(said)
	if _, err := h.DB.Write.ExecContext(ctx, `UPDATE hosts SET agents = $1 WHERE id = $2`, string(b), host.ID); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	host.Agents = said
	return nil
}

// setAgents sets the profiles from the column agents (NULL: unsaid).
func (hs *Host) setAgents(col sql.NullString) {
	if col.Valid {
		hs.Agents = []string{}
		_ = json.Unmarshal([]byte(col.String), &hs.Agents)
	}
}

// LocalTakes reports whether the server's own worker takes offer o,
// with the profiles agents and its environment getenv: it has no labels,
// so o must ask for none, and the CLI of o's profile and the program of
// o's agent command must be on getenv's PATH (looked up at each call: a
// CLI installed meanwhile counts). With no getenv, or no agents, any
// profile or command is taken. The worker asks it of each offer; Waiting
// asks it of a queued run.
func LocalTakes(o queue.Offer, agents agent.Catalog, getenv func(string) string) bool {
	if len(o.Labels) > 0 {
		return false
	}
	if getenv == nil {
		return true
	}
	path := getenv("PATH")
	if o.Agent != "" && agents != nil {
		p, ok := agents.Lookup(o.Agent)
		if !ok {
			return false
		}
		if _, err := submit.LookPath(p.Binary, path); err != nil {
			return false
		}
	}
	if o.Command != "" {
		if _, err := submit.CommandPreflight(o.Command, path); err != nil {
			return false
		}
	}
	return true
}

// HostHas reports whether an enrolled host, revoked ones aside, said in
// its last claim that it has profile's CLI on its PATH: a submit to this
// server then takes a profile whose CLI is not on the server's own. ctx
// is the submit's: a host list that cannot be read in it says no.
func (h *Hosts) HostHas(ctx context.Context, profile string) bool {
	hosts, err := h.List(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(hosts, func(hs *Host) bool {
		return !hs.Revoked && slices.Contains(hs.Agents, profile)
	})
}

// AnyHost reports whether an agent host, revoked ones aside, is enrolled:
// a submit to this server then leaves an agent command whose program is
// not on the server's own PATH to the hosts. ctx is the submit's.
func (h *Hosts) AnyHost(ctx context.Context) bool {
	hosts, err := h.List(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(hosts, func(hs *Host) bool { return !hs.Revoked })
}
