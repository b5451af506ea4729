package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/policy"
	"github.com/agentrun/agentrun/internal/run"
)

// policyOutput is what `agentrun policy check --json` and `agentrun
// policy show --json` print: the file, its digest and its content in
// canonical form (show: all empty and null when no policy is in force).
type policyOutput struct {
	Path   string      `json:"path"`
	Source string      `json:"source"`
	Digest string      `json:"digest"`
	Policy *policy.Org `json:"policy"`
}

func (app *App) newPolicyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "policy check [FILE] | policy show",
		Short: "Check an organization policy file, or show the policy in force",
		Long: `An organization policy file (TOML, version = 1) bounds every run: the agents,
sandboxes, images (by digest), network modes, egress entries and presets,
variables, required checks and maxima it may have. Submit and resume keep to
it: a run outside it is refused (policy_violation) before anything is made.
'agentrun server --policy FILE' holds a team to it; on one machine, policy
in config.toml or AGENTRUN_POLICY names it. The README's "Organization
policy" lists every key.

'policy check [FILE]' reads FILE (default: the policy in force), refuses
what it cannot take (bad_policy, naming the key) and prints its digest:
the canonical digest of its content, the same however it is written,
recorded on every run as provenance.org_policy_digest.

'policy show' prints the policy in force on this machine.

--json prints {"path", "source", "digest", "policy"} (policy is the
canonical content; null, with the other fields empty, when none is in force).`,
	}
	check := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate a policy file and print its digest",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			return app.runPolicy(cmd.Context(), file, true)
		},
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the policy in force",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return app.runPolicy(cmd.Context(), "", false) },
	}
	c.AddCommand(check, show)
	return c
}

// runPolicy checks file (check) or shows the policy in force.
func (app *App) runPolicy(_ context.Context, file string, check bool) error {
	var out policyOutput
	if file != "" {
		o, err := policy.LoadOrg(file)
		if err != nil {
			return err
		}
		out = policyOutput{Path: file, Source: "argument", Digest: o.Digest(), Policy: o}
	} else {
		s, err := config.Load(app.Getenv)
		if err != nil {
			return err
		}
		o, err := app.policyInForce(s)
		if err != nil {
			return err
		}
		if o == nil && check {
			return catalog.Usage.New("no policy is in force to check").
				WithFix("name the file: agentrun policy check FILE (or set policy in config.toml, or AGENTRUN_POLICY)")
		}
		out = policyOutput{Source: policySource(app.Getenv, s)}
		if o != nil {
			out.Path, out.Digest, out.Policy = o.Path, o.Digest(), o
		}
	}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	if out.Policy == nil {
		fmt.Fprintln(app.Stdout, "no organization policy is in force (set policy in config.toml, or AGENTRUN_POLICY)")
		return nil
	}
	if check {
		fmt.Fprintf(app.Stdout, "%s: valid\ndigest %s\n", app.tildePath(out.Path), out.Digest)
		return nil
	}
	fmt.Fprintf(app.Stdout, "policy  %s (%s)\ndigest  %s\n\n", app.tildePath(out.Path), out.Source, out.Digest)
	t := table{header: []string{"RULE", "ALLOWS"}, colour: app.colour()}
	for _, r := range policyRules(out.Policy) {
		t.add(r[0], r[1])
	}
	return t.write(app.Stdout)
}

// policySource says where the policy in force was named.
func policySource(getenv func(string) string, s config.Settings) string {
	switch {
	case s.Policy == "":
		return ""
	case getenv("AGENTRUN_POLICY") != "":
		return "environment AGENTRUN_POLICY"
	}
	return "config file"
}

// policyInForce is the organization policy submit and resume keep to: the
// server's, read once when it started, else the file the settings name,
// read by every command that makes or changes a run (a broken or missing
// file fails it: a policy is never silently ignored).
func (app *App) policyInForce(s config.Settings) (*policy.Org, error) {
	if app.Deps.PolicyFixed {
		return app.Deps.Policy, nil
	}
	if s.Policy == "" {
		return nil, nil
	}
	return policy.LoadOrg(s.Policy)
}

// policyRules are the rules o sets, for people.
func policyRules(o *policy.Org) [][2]string {
	var rows [][2]string
	list := func(rule string, v []string) {
		if v != nil {
			rows = append(rows, [2]string{rule, orNone(strings.Join(v, ", "))})
		}
	}
	list("agents", o.Agents)
	list("sandboxes", o.Sandboxes)
	rows = append(rows, [2]string{"host_sandbox", strconv.FormatBool(o.HostSandbox)})
	list("images", o.Images)
	list("network", o.Network)
	if o.Egress != nil {
		list("egress.allow", o.Egress.Allow)
		list("egress.presets", o.Egress.Presets)
	}
	list("env", o.Env)
	for _, c := range o.Checks {
		rows = append(rows, [2]string{"checks", c.Name + "=" + c.Command})
	}
	for _, m := range []struct {
		rule string
		set  bool
		v    string
	}{
		{"max_timeout", o.MaxTimeout > 0, time.Duration(o.MaxTimeout).String()},
		{"max_attempts", o.MaxAttempts > 0, strconv.Itoa(o.MaxAttempts)},
		{"max_tokens", o.MaxTokens > 0, strconv.FormatInt(o.MaxTokens, 10)},
		{"max_cost", o.MaxCost > 0, strconv.FormatFloat(o.MaxCost, 'f', -1, 64) + " USD"},
		{"max_disk", o.MaxDisk > 0, run.FormatSize(o.MaxDisk)},
	} {
		if m.set {
			rows = append(rows, [2]string{m.rule, m.v})
		}
	}
	return rows
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
