package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/run"
)

type egressOptions struct {
	ID string
}

func (o *egressOptions) Validate() error { return nil }

func (app *App) newEgressCmd() *cobra.Command {
	var o egressOptions
	return &cobra.Command{
		Use:   "egress ID",
		Short: "Show the hosts a run reached and the hosts it was denied",
		Long: `Show a run's network traffic through the egress proxy: every host:port it
reached (connections, bytes, the allowlist entry that allowed it), and every
host:port it was denied, with why and the --allow flag that would allow it on
the next run. A name that resolved to a private or loopback address needs the
IP entry named; agentrun never suggests allowing more than the one address.

Under --json: {"id", "network", "allow", "allowed": [...], "denied": [...],
"unreadable"} (fields in the README).
`,
		Args: exactArgs(1, "egress needs one run ID"),
		RunE: func(c *cobra.Command, args []string) error {
			o.ID = args[0]
			if app.remote != nil {
				return app.remoteEgress(c.Context(), o.ID)
			}
			return runEgress(c.Context(), &o, app)
		},
	}
}

// egressOutput is `egress --json` (documented in the README).
type egressOutput struct {
	ID      string   `json:"id"`
	Network string   `json:"network"` // none | allowlist
	Allow   []string `json:"allow"`   // the run's allowlist as given
	egress.Summary
	// Unreadable counts egress events whose data could not be read.
	Unreadable int `json:"unreadable"`
}

func runEgress(ctx context.Context, o *egressOptions, app *App) error {
	if err := o.Validate(); err != nil {
		return err
	}
	env, r, err := app.lookupRun(ctx, o.ID)
	if err != nil {
		return err
	}
	evs, err := env.Store.Events(ctx, r.ID, 0)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	out := egressOutput{ID: r.ID, Network: r.Sandbox.Network, Allow: r.Sandbox.Allow}
	if out.Network == "" {
		out.Network = "none"
	}
	if out.Allow == nil {
		out.Allow = []string{}
	}
	var recs []egress.Record
	for _, e := range evs {
		if e.Type != run.EventEgress {
			continue
		}
		var rec egress.Record
		if err := json.Unmarshal(e.Data, &rec); err != nil || rec.Host == "" {
			out.Unreadable++
			continue
		}
		recs = append(recs, rec)
	}
	out.Summary = egress.Summarize(recs)
	notNeeded(app.Deps.Agents, r, out.Denied)
	if out.Allowed == nil {
		out.Allowed = []egress.AllowedHost{}
	}
	if out.Denied == nil {
		out.Denied = []egress.DeniedHost{}
	}
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	return app.printEgress(r, &out)
}

func (app *App) printEgress(r *run.Run, out *egressOutput) error {
	col := app.colour()
	net := out.Network
	if len(out.Allow) > 0 {
		net += ": " + oneLine(strings.Join(out.Allow, ", "), 100)
	}
	fmt.Fprintf(app.Stdout, "network  %s\n", net)
	if out.Unreadable > 0 {
		app.warn("%d egress events of run %s could not be read", out.Unreadable, r.ID)
	}
	if len(out.Allowed) == 0 && len(out.Denied) == 0 {
		if out.Network == "none" {
			fmt.Fprintln(app.Stdout, "no network: the sandbox had none, so nothing was reached or denied")
		} else {
			fmt.Fprintln(app.Stdout, "no connections were made")
		}
		return nil
	}
	if len(out.Allowed) > 0 {
		fmt.Fprintf(app.Stdout, "\n%s\n", paint(col, sgrGreen, "allowed"))
		t := table{header: []string{"  HOST", "CONNS", "UP", "DOWN", "RULE"}, colour: col}
		for _, a := range out.Allowed {
			rule := strings.Join(a.Rules, ", ")
			if a.Via != "" {
				rule += " (via " + a.Via + ")"
			}
			if a.Errors > 0 {
				rule += fmt.Sprintf(" (%d failed upstream)", a.Errors)
			}
			t.add("  "+oneLine(hostPort(a.Host, a.Port), 60), strconv.Itoa(a.Count),
				humanBytes(a.BytesUp), humanBytes(a.BytesDn), oneLine(rule, 60))
		}
		if err := t.write(app.Stdout); err != nil {
			return err
		}
	}
	if len(out.Denied) > 0 {
		fmt.Fprintf(app.Stdout, "\n%s\n", paint(col, sgrRed, "denied"))
		t := table{header: []string{"  HOST", "CONNS", "WHY", "TO ALLOW"}, colour: col}
		var flags []string
		for _, d := range out.Denied {
			flag := d.Flag
			if d.Code == "not_needed" {
				flag = "(not needed)"
			} else if flag == "" {
				flag = "(no entry can allow this)"
			} else if !slices.Contains(flags, flag) {
				flags = append(flags, flag) // localhost and 127.0.0.1 both suggest 127.0.0.1
			}
			t.add("  "+oneLine(hostPort(d.Host, d.Port), 60), strconv.Itoa(d.Count), oneLine(d.Why, 90), oneLine(flag, 70))
		}
		if err := t.write(app.Stdout); err != nil {
			return err
		}
		if len(flags) > 0 {
			fmt.Fprintf(app.Stdout, "\nto allow them next time, add to submit: %s\n", oneLine(strings.Join(flags, " "), 0))
		}
	}
	return nil
}

// hostPort joins a host and port, bracketing IPv6 literals.
func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

// humanBytes renders a byte count: 512 B, 3.4 KiB, 12 MiB.
func humanBytes(n int64) string { return run.FormatSize(n) }

// notNeeded marks the denials a run never needs: the agent CLI's
// telemetry, update and feature-flag hosts (and its provider's API, which
// the model gateway serves). No flag is suggested for them.
func notNeeded(agents agent.Catalog, r *run.Run, denied []egress.DeniedHost) {
	p, ok := agents.Lookup(r.Agent.Name)
	if !ok {
		return
	}
	for i := range denied {
		d := &denied[i]
		for _, h := range p.Telemetry {
			if d.Host == h || strings.HasSuffix(d.Host, "."+h) {
				d.Flag, d.Code = "", "not_needed"
				d.Why = "the " + p.Name + " CLI's telemetry, updates or model API (the model goes through the gateway): a run never needs it"
				break
			}
		}
	}
}
