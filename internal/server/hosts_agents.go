package server

// hosts_agents.go: which agent CLIs a taker has. A profile's CLI is found
// on the PATH of the machine that runs it: each host says in every claim
// which profiles' CLIs are on its PATH (submit.Installed), and is given
// only runs whose CLI it has; the server's own worker has those on the
// server's PATH. What the hosts said last is kept in memory: it is
// theirs to say again, within a claim's wait of the server's start.

import (
	"context"
	"slices"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
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

// heard keeps the profiles host said it has (nil: it did not say, as a
// host of an earlier version does not).
func (h *Hosts) heard(host string, agents []string) {
	if agents != nil {
		h.agents.Store(host, slices.Clone(agents))
	}
}

// hostAgents are the profiles host said it has in its last claim (nil:
// not heard since this server started, or it does not say).
func (h *Hosts) hostAgents(host string) []string {
	if v, ok := h.agents.Load(host); ok {
		return v.([]string)
	}
	return nil
}

// localHas reports whether the server's own worker has profile's CLI.
func (h *Hosts) localHas(profile string) bool {
	if h.Getenv == nil {
		return false
	}
	return slices.Contains(submit.Installed(h.Agents, h.Getenv("PATH")), profile)
}

// HostHas reports whether an enrolled host, revoked ones aside, said in
// its last claim that it has profile's CLI on its PATH: a submit to this
// server then takes a profile whose CLI is not on the server's own.
func (h *Hosts) HostHas(profile string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hosts, err := h.List(ctx)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(hosts, func(hs *Host) bool {
		return !hs.Revoked && slices.Contains(h.hostAgents(hs.ID), profile)
	})
}
