package cli

// server_hosts.go: the server's agent hosts, administered on the server's
// host against its database (agentrun server enrol-token, hosts,
// revoke-host). They need no route and no admin token: whoever can read
// the server's database administers it already.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/supervisor"
)

// serverDBOptions name the server's database, as agentrun server does.
type serverDBOptions struct {
	Data        string
	DatabaseURL string
}

func (o *serverDBOptions) flags(c *cobra.Command) {
	c.Flags().StringVar(&o.Data, "data", "", "the server's data `DIR` (default: the data directory's server/)")
	c.Flags().StringVar(&o.DatabaseURL, "database-url", "", "the server's database `URL` (default: SQLite in the data directory)")
}

// openHosts opens the server's database and its host registry; close
// closes the database.
func (app *App) openHosts(ctx context.Context, o *serverDBOptions) (h *server.Hosts, closeDB func(), err error) {
	if app.Deps.OpenServer == nil {
		return nil, nil, catalog.Internal.New("this build has no team server")
	}
	data, err := app.serverData(&serverOptions{Data: o.Data})
	if err != nil {
		return nil, nil, err
	}
	url := o.DatabaseURL
	if url == "" {
		url = "sqlite:" + filepath.Join(data, "agentrun.db")
	}
	be, err := app.Deps.OpenServer(ctx, url, server.BackendOptions{})
	if err != nil {
		return nil, nil, catalog.Home.Wrap(err, "the server's database: %v", err).WithFix("check --data or --database-url")
	}
	return newHosts(app, be, data, nil), func() { _ = be.Close() }, nil
}

// newHosts is the host registry of the server whose data directory is data.
func newHosts(app *App, be *server.Backend, data string, projects *server.Projects) *server.Hosts {
	if projects == nil {
		projects = &server.Projects{Dir: filepath.Join(data, "projects")}
	}
	home := supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: layout.Layout{Home: data}, Claimed: true,
		Sweepers: app.Deps.sweepers(app.Executable)}
	return &server.Hosts{DB: be.HostsDB, Leases: be.HostLeases, Home: home, Projects: projects, TTL: be.LeaseTTL, Queue: be.Queue, Cancels: be.Cancels}
}

func (app *App) newServerHostCmds() []*cobra.Command {
	tok := &serverDBOptions{}
	var ttl time.Duration
	enrol := &cobra.Command{
		Use:   "enrol-token [--ttl 1h] [--data DIR]",
		Short: "Make a one-time token that enrols one agent host",
		Long: `Make a one-time token that enrols one agent host ('agentrun worker --server
URL --enrol-token-file FILE'). It works once, until it expires (--ttl).
Run it on the server's host: it writes to the server's database.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if ttl <= 0 || ttl > 30*24*time.Hour {
				return catalog.Usage.New("--ttl %s: between a second and 30 days", ttl)
			}
			h, closeDB, err := app.openHosts(c.Context(), tok)
			if err != nil {
				return err
			}
			defer closeDB()
			t, err := h.NewEnrolToken(c.Context(), ttl)
			if err != nil {
				return err
			}
			if app.JSON {
				return writeJSON(app.Stdout, t)
			}
			fmt.Fprintln(app.Stdout, t.Token)
			app.warn("the token enrols one host until %s; give it to 'agentrun worker --enrol-token-file FILE'", t.ExpiresAt.Local().Format(time.RFC3339))
			return nil
		},
	}
	tok.flags(enrol)
	enrol.Flags().DurationVar(&ttl, "ttl", time.Hour, "the token expires after this `DURATION`")

	lo := &serverDBOptions{}
	hosts := &cobra.Command{
		Use:   "hosts [--data DIR]",
		Short: "List the agent hosts enrolled with the server",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			h, closeDB, err := app.openHosts(c.Context(), lo)
			if err != nil {
				return err
			}
			defer closeDB()
			list, err := h.List(c.Context())
			if err != nil {
				return err
			}
			if app.JSON {
				return writeJSON(app.Stdout, map[string]any{"hosts": list})
			}
			printHosts(app.Stdout, list)
			return nil
		},
	}
	lo.flags(hosts)

	ro := &serverDBOptions{}
	revoke := &cobra.Command{
		Use:   "revoke-host ID [--data DIR]",
		Short: "Revoke an agent host: its requests are refused, its runs queued again",
		Args:  exactArgs(1, "revoke-host needs a host id ('agentrun server hosts' lists them)"),
		RunE: func(c *cobra.Command, args []string) error {
			h, closeDB, err := app.openHosts(c.Context(), ro)
			if err != nil {
				return err
			}
			defer closeDB()
			hs, err := h.Revoke(c.Context(), args[0])
			if err != nil {
				return err
			}
			if app.JSON {
				return writeJSON(app.Stdout, hs)
			}
			fmt.Fprintf(app.Stdout, "host %s (%s) revoked; %d run(s) queued again\n", hs.ID, hs.Name, len(hs.Runs))
			return nil
		},
	}
	ro.flags(revoke)
	return []*cobra.Command{enrol, hosts, revoke}
}

// printHosts is the host list for people.
func printHosts(w io.Writer, list []*server.Host) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no agent hosts are enrolled ('agentrun server enrol-token' makes a token for one)")
		return
	}
	rows := [][]string{{"ID", "NAME", "SLOTS", "LABELS", "HEARTBEAT", "SEAL KEY", "AGENT CLIS", "RUNS"}}
	for _, h := range list {
		var labels []string
		for k, v := range h.Labels {
			labels = append(labels, k+"="+v)
		}
		slices.Sort(labels)
		seen := "never"
		if h.LastHeartbeat != nil {
			seen = time.Since(*h.LastHeartbeat).Round(time.Second).String() + " ago"
		}
		if h.Revoked {
			seen = "revoked"
		}
		key := cmp.Or(h.SealKey, "none")
		agents := "-" // not said yet
		if h.Agents != nil {
			agents = cmp.Or(strings.Join(h.Agents, ","), "none")
		}
		rows = append(rows, []string{h.ID, h.Name, fmt.Sprint(h.Slots), strings.Join(labels, ","), seen, key, agents, strings.Join(h.Runs, ",")})
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-14s %-20s %-5s %-24s %-14s %-16s %-20s %s\n", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7])
	}
}
