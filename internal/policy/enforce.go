package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/run"
)

// hostBackend is the sandbox backend that isolates nothing.
const hostBackend = "host"

// Apply fills what a planned run leaves open with the policy's values,
// before Check: the required checks are added (after the run's own, unless
// the run has a check of that name already, which Check then compares),
// and a bound the run leaves open (no timeout, the backend's default disk,
// no token or cost budget) gets the policy's maximum. Nil applies nothing.
//
// The required checks are added rather than refused when missing: they
// are the organization's, so the command that runs is the policy's own,
// every run carries it without each user repeating it, and the run's
// effective policy (its digest) records it.
func (o *Org) Apply(r *run.Run) {
	if o == nil {
		return
	}
	for _, c := range o.Checks {
		if !slices.ContainsFunc(r.Checks, func(x run.CheckSpec) bool { return x.Name == c.Name }) {
			r.Checks = append(r.Checks, c)
		}
	}
	if o.MaxTimeout > 0 && r.Timeout == 0 {
		r.Timeout = run.Duration(o.MaxTimeout)
	}
	if o.MaxDisk > 0 && r.Sandbox.Limits.DiskBytes == 0 {
		r.Sandbox.Limits.DiskBytes = o.MaxDisk
	}
	if g := r.Gateway; g != nil {
		if o.MaxTokens > 0 && g.MaxTokens == 0 {
			g.MaxTokens = o.MaxTokens
		}
		if o.MaxCost > 0 && g.MaxCost == 0 {
			g.MaxCost = o.MaxCost
		}
	}
}

// Check returns a catalog.PolicyViolation error for the first rule run r
// breaks (its cause names the rule, the value asked for and what the
// policy allows), or nil. It reads the run record only, so submit (after
// Apply) and resume (with the values resume changes) check alike. Nil
// allows everything.
func (o *Org) Check(r *run.Run) error {
	if o == nil {
		return nil
	}
	for _, check := range []func(*run.Run) error{o.checkAgent, o.checkSandbox, o.checkImage, o.checkNetwork, o.checkEgress, o.checkEnv, o.checkChecks, o.checkMaxima} {
		if err := check(r); err != nil {
			return err
		}
	}
	return nil
}

// violation is the error for rule: what the run asks for and what the
// policy allows.
func (o *Org) violation(rule, asked, allows string) error {
	return catalog.PolicyViolation.New("rule %s: the run asks for %s; the policy (%s) allows %s", rule, asked, o.Path, allows)
}

// oneOf renders a set the policy allows.
func oneOf(set []string) string {
	if len(set) == 0 {
		return "none"
	}
	return "only " + strings.Join(set, ", ")
}

func (o *Org) checkAgent(r *run.Run) error {
	if o.Agents != nil && !slices.Contains(o.Agents, r.Agent.Name) {
		return o.violation("agents", fmt.Sprintf("the agent %q", r.Agent.Name), oneOf(o.Agents))
	}
	return nil
}

func (o *Org) checkSandbox(r *run.Run) error {
	b := r.Sandbox.Backend
	if b == hostBackend && !o.HostSandbox {
		return o.violation("host_sandbox", "the host sandbox (no isolation: the agent runs as the user)", "no host sandbox (host_sandbox is not true)")
	}
	if o.Sandboxes != nil && !slices.Contains(o.Sandboxes, b) {
		return o.violation("sandboxes", fmt.Sprintf("the sandbox %q", b), oneOf(o.Sandboxes))
	}
	return nil
}

// checkImage holds a run that starts from an image (a backend that runs
// images) to the images named by digest.
func (o *Org) checkImage(r *run.Run) error {
	if o.Images == nil || r.Sandbox.Image == "" {
		return nil
	}
	ref := r.Provenance.Image
	if !byDigest(ref) {
		return o.violation("images", fmt.Sprintf("the image %q, a tag", ref), "images by digest only (NAME@sha256:HEX or sha256:HEX): "+oneOf(o.Images))
	}
	have := []string{digestOf(r.Sandbox.Image), digestOf(ref)}
	for _, d := range r.Provenance.ImageDigests {
		have = append(have, digestOf(d))
	}
	for _, img := range o.Images {
		if slices.Contains(have, digestOf(img)) {
			return nil
		}
	}
	return o.violation("images", fmt.Sprintf("the image %q (%s)", ref, r.Sandbox.Image), oneOf(o.Images))
}

// byDigest reports whether an image reference names content: a digest
// (NAME@sha256:, sha256:) or a full image id, not a tag.
func byDigest(ref string) bool {
	if strings.Contains(ref, "@sha256:") || strings.HasPrefix(ref, "sha256:") {
		return true
	}
	return len(ref) == 64 && strings.Trim(ref, "0123456789abcdef") == ""
}

// digestOf is the sha256:HEX part of an image reference or id.
func digestOf(ref string) string {
	if i := strings.LastIndex(ref, "sha256:"); i >= 0 {
		return ref[i:]
	}
	return "sha256:" + ref
}

func (o *Org) checkNetwork(r *run.Run) error {
	if o.Network != nil && !slices.Contains(o.Network, r.Sandbox.Network) {
		return o.violation("network", fmt.Sprintf("the network mode %q", r.Sandbox.Network), oneOf(o.Network))
	}
	return nil
}

// checkEgress holds every entry of the run's allowlist (the agent
// profile's hosts and --allow, presets expanded) and of its setup
// command's to the policy's entries and presets.
func (o *Org) checkEgress(r *run.Run) error {
	if o.Egress == nil {
		return nil
	}
	var allowed []egress.Entry
	names := slices.Clone(o.Egress.Allow)
	for _, p := range o.Egress.Presets {
		hosts, _ := egress.PresetEntries(p)
		names = append(names, hosts...)
	}
	for _, n := range names {
		if e, err := egress.ParseEntry(n); err == nil {
			allowed = append(allowed, e)
		}
	}
	what := slices.Concat(o.Egress.Allow, prefixed("preset:", o.Egress.Presets))
	lists := []struct {
		who     string
		entries []string
	}{{"the allowlist entry", r.Sandbox.Allow}}
	if r.Setup != nil {
		lists = append(lists, struct {
			who     string
			entries []string
		}{"the setup command's allowlist entry", r.Setup.Allow})
	}
	for _, l := range lists {
		for _, s := range l.entries {
			e, err := egress.ParseEntry(s)
			if err == nil && slices.ContainsFunc(allowed, func(a egress.Entry) bool { return a.Covers(e) }) {
				continue
			}
			return o.violation("egress", fmt.Sprintf("%s %q (from %s or the agent profile's hosts)", l.who, s, catalog.Field("allow")), oneOf(what))
		}
	}
	return nil
}

func prefixed(p string, in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = p + s
	}
	return out
}

func (o *Org) checkEnv(r *run.Run) error {
	if o.Env == nil {
		return nil
	}
	for _, n := range r.Agent.Env {
		if !slices.Contains(o.Env, n) {
			return o.violation("env", fmt.Sprintf("the variable %s (%s)", n, catalog.Field("env")), oneOf(o.Env))
		}
	}
	return nil
}

func (o *Org) checkChecks(r *run.Run) error {
	for _, c := range o.Checks {
		i := slices.IndexFunc(r.Checks, func(x run.CheckSpec) bool { return x.Name == c.Name })
		switch {
		case i < 0:
			return o.violation("checks", fmt.Sprintf("no check %q", c.Name), fmt.Sprintf("no run without the required check %s=%q", c.Name, c.Command))
		case r.Checks[i].Command != c.Command:
			return o.violation("checks", fmt.Sprintf("the check %s=%q", c.Name, r.Checks[i].Command), fmt.Sprintf("the required check %s only as %q (drop yours: the policy adds it)", c.Name, c.Command))
		}
	}
	return nil
}

// checkMaxima holds the run's bounds to the policy's maxima; an open
// bound (0: no limit) passes no maximum.
func (o *Org) checkMaxima(r *run.Run) error {
	if o.MaxAttempts > 0 && r.MaxAttempts > o.MaxAttempts {
		return o.violation("max_attempts", fmt.Sprintf("%s %d", catalog.Field("attempts"), r.MaxAttempts), "at most "+strconv.Itoa(o.MaxAttempts))
	}
	if m := time.Duration(o.MaxTimeout); m > 0 && (r.Timeout == 0 || r.Timeout.D() > m) {
		return o.violation("max_timeout", fmt.Sprintf("%s %s", catalog.Field("timeout"), openOr(r.Timeout == 0, r.Timeout.D().String())), "at most "+m.String())
	}
	if d := r.Sandbox.Limits.DiskBytes; o.MaxDisk > 0 && (d == 0 || d > o.MaxDisk) {
		return o.violation("max_disk", fmt.Sprintf("%s %s", catalog.Field("disk"), openOr(d == 0, strconv.FormatInt(d, 10)+" bytes")), fmt.Sprintf("at most %d bytes (%s)", o.MaxDisk, run.FormatSize(o.MaxDisk)))
	}
	g := r.Gateway
	if g == nil {
		return nil // no model gateway: no model traffic to budget
	}
	if o.MaxTokens > 0 && (g.MaxTokens == 0 || g.MaxTokens > o.MaxTokens) {
		return o.violation("max_tokens", fmt.Sprintf("%s %s", catalog.Field("max_tokens"), openOr(g.MaxTokens == 0, strconv.FormatInt(g.MaxTokens, 10))), "at most "+strconv.FormatInt(o.MaxTokens, 10))
	}
	if o.MaxCost > 0 && (g.MaxCost == 0 || g.MaxCost > o.MaxCost) {
		return o.violation("max_cost", fmt.Sprintf("%s %s", catalog.Field("max_cost"), openOr(g.MaxCost == 0, strconv.FormatFloat(g.MaxCost, 'f', -1, 64))), "at most "+strconv.FormatFloat(o.MaxCost, 'f', -1, 64)+" US dollars")
	}
	return nil
}

// openOr is "no limit" for an open bound, else v.
func openOr(open bool, v string) string {
	if open {
		return "no limit"
	}
	return v
}
