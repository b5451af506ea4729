// Package policy computes the effective policy of a run (everything that
// decides what the agent may do: sandbox, network, allowlist, environment
// variable names, limits, checks, attempts, timeout, agent) and its
// canonical bytes and digest, recorded as provenance in run.json.
//
// Contract: Canonical is deterministic: the same effective settings always
// give the same bytes (fields in a fixed order, set-like lists sorted and
// deduplicated, no whitespace). It never includes secret values: only the
// NAMES of environment variables.
//
// It also reads an organization policy file (Org, org.go): the bounds an
// organization sets on every run (agents, sandboxes, images by digest,
// network, egress, variables, required checks, maxima), with a canonical
// digest of its content recorded on every run beside the effective
// policy's. Submit applies it (Apply) and refuses a run outside it
// (Check); resume checks the run as it would continue. It never reads a
// repository: only the user's or the server operator's file.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/internal/run"
)

// Version is bumped when the canonical form changes.
const Version = 1

// Effective is the canonical policy document.
type Effective struct {
	Version       int             `json:"version"`
	Sandbox       string          `json:"sandbox"`
	Network       string          `json:"network"`
	Allow         []string        `json:"allow"`
	LoopbackTCP   bool            `json:"loopback_tcp,omitempty"`
	Env           []string        `json:"env"`
	ReadOnlyPaths []string        `json:"read_only_paths"`
	Limits        run.Limits      `json:"limits"`
	Checks        []run.CheckSpec `json:"checks"`
	Attempts      int             `json:"attempts"`
	Timeout       string          `json:"timeout"`
	Agent         Agent           `json:"agent"`
	MaxFiles      int             `json:"max_files"`
	MaxBytes      int64           `json:"max_bytes"`
	// Gateway is where the model traffic goes and the run's budget (the
	// key sources are not policy: they name no more than where a key is).
	Gateway *Gateway `json:"gateway,omitempty"`
	// Setup is the setup command and its own allowlist; Toolchains the
	// host caches the run reads (both absent for a run without them).
	Setup      *Setup   `json:"setup,omitempty"`
	Toolchains []string `json:"toolchain_caches,omitempty"`
}

// Setup is the setup command's part of the policy.
type Setup struct {
	Command string   `json:"command"`
	Allow   []string `json:"allow"`
}

// Gateway is the model gateway's part of the policy.
type Gateway struct {
	Routes    []Route `json:"routes"`
	MaxTokens int64   `json:"max_tokens"`
	MaxCost   float64 `json:"max_cost"`
}

// Route is one gateway route: a protocol family to an upstream.
type Route struct {
	Name          string `json:"name"`
	URL           string `json:"url"`
	MaxConcurrent int    `json:"max_concurrent,omitempty"`
}

// Agent is the part of the policy that names the agent.
type Agent struct {
	Name     string   `json:"name"`
	Command  string   `json:"command"`
	Binary   string   `json:"binary,omitempty"`
	Hosts    []string `json:"hosts"`
	Model    string   `json:"model,omitempty"`
	Provider string   `json:"provider,omitempty"`
	BaseURL  string   `json:"base_url,omitempty"`
}

// FromRun extracts the effective policy from a run record.
func FromRun(r *run.Run) Effective {
	checks := slices.Clone(r.Checks)
	if checks == nil {
		checks = []run.CheckSpec{}
	}
	var gw *Gateway
	if g := r.Gateway; g != nil {
		gw = &Gateway{MaxTokens: g.MaxTokens, MaxCost: g.MaxCost, Routes: []Route{}}
		for _, rs := range g.Routes {
			gw.Routes = append(gw.Routes, Route{Name: rs.Name, URL: rs.URL, MaxConcurrent: rs.MaxConcurrent})
		}
		slices.SortFunc(gw.Routes, func(a, b Route) int { return strings.Compare(a.Name, b.Name) })
	}
	var setup *Setup
	if r.Setup != nil {
		setup = &Setup{Command: r.Setup.Command, Allow: set(r.Setup.Allow)}
	}
	var tcs []string
	for _, tc := range r.Sandbox.Toolchains {
		tcs = append(tcs, tc.Name+"="+tc.Path)
	}
	return Effective{
		Setup:         setup,
		Toolchains:    tcs,
		Gateway:       gw,
		Version:       Version,
		Sandbox:       r.Sandbox.Backend,
		Network:       r.Sandbox.Network,
		Allow:         set(r.Sandbox.Allow),
		LoopbackTCP:   r.Sandbox.LoopbackTCP,
		Env:           set(r.Agent.Env),
		ReadOnlyPaths: set(r.Sandbox.ReadOnlyPaths),
		Limits:        r.Sandbox.Limits,
		Checks:        checks,
		Attempts:      r.MaxAttempts,
		Timeout:       r.Timeout.String(),
		Agent: Agent{Name: r.Agent.Name, Command: r.Agent.Command, Binary: r.Agent.Binary, Hosts: set(r.Agent.Hosts),
			Model: r.Agent.Model, Provider: r.Agent.Provider, BaseURL: r.Agent.BaseURL},
		MaxFiles: r.Export.MaxFiles,
		MaxBytes: r.Export.MaxBytes,
	}
}

// Canonical returns the canonical bytes of e.
func (e Effective) Canonical() []byte {
	e.Allow, e.Env, e.ReadOnlyPaths, e.Agent.Hosts = set(e.Allow), set(e.Env), set(e.ReadOnlyPaths), set(e.Agent.Hosts)
	if e.Checks == nil {
		e.Checks = []run.CheckSpec{}
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // plain data; cannot fail
	}
	return b
}

// Digest is "sha256:<hex>" of the canonical bytes.
func (e Effective) Digest() string {
	sum := sha256.Sum256(e.Canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// set returns a sorted, deduplicated, non-nil copy.
func set(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	return out
}
