package cli

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/seal"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/submit"
	"github.com/agentrun/agentrun/internal/worker"
)

type workerOptions struct {
	Server    string
	TokenFile string
	Name      string
	Labels    []string
	Slots     int
	Data      string
	Backends  []string
	OwnEnv    []string
}

// Validate checks the flags that need no server.
func (o *workerOptions) Validate() error {
	switch {
	case o.Server == "":
		return catalog.Usage.New("agentrun worker needs --server URL (the team server to join)")
	case o.Slots < 1:
		return catalog.Usage.New("--slots %d: the runs it executes at once, at least 1", o.Slots)
	}
	for _, l := range o.Labels {
		if k, _, ok := strings.Cut(l, "="); !ok || k == "" {
			return catalog.Usage.New("--label %q: want KEY=VALUE", l)
		}
	}
	return nil
}

func (app *App) newWorkerCmd() *cobra.Command {
	o := &workerOptions{}
	c := &cobra.Command{
		Use:   "worker --server URL [--enrol-token-file FILE] [--name NAME] [--label K=V]... [--slots N] [--data DIR] [--own-env NAME]...",
		Short: "Join a team server as an agent host and execute its runs (Full mode, preview)",
		Long: `Join a team server as an agent host: claim the queued runs this host can
execute (its sandbox backends, its free slots), execute each with the same
supervisor as 'agentrun submit', send the run's journal and logs to the
server as they happen, and upload the result (the patch and the branch, as
a bundle the server checks against the base before it takes it).

The first start enrols the host: --enrol-token-file names a file holding a
one-time token made on the server's host with 'agentrun server
enrol-token'. The host's identity (its id and credential) is kept in
--data DIR/host.json (mode 0600; default: the data directory's worker/);
later starts use it and need no token. 'agentrun server revoke-host ID'
revokes it.

The server renews the leases of this host's runs only while its heartbeats
come. A host that stops (killed, cut off) loses its runs after the lease
TTL: they are queued again for another host, and whatever this host sends
about them later is refused. A host that comes back gives back the runs it
was executing (they are queued again) and drops what it kept of them.
SIGTERM or SIGINT stops it: its runs end interrupted and are queued again.

The values of a run's variables (the model provider keys its gateway
uses, the variables its spec passes to the agent) are the server's: each
claim carries them sealed to this host's key (HPKE, made at enrolment and
kept in host.json; a host enrolled before registers one at its next
start), and the host opens them in memory only, never writing them to its
disk. A run that needs them is not given to a host without a key. This
host's own environment fills only the names --own-env gives, and only
where the server sent no value.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Server = app.serverURL
			if err := o.Validate(); err != nil {
				return err
			}
			return app.runWorker(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.TokenFile, "enrol-token-file", "", "enrol with the one-time token in this `FILE` (first start only)")
	f.StringVar(&o.Name, "name", "", "the host's `NAME` on the server (default: the host name)")
	f.StringArrayVar(&o.Labels, "label", nil, "a `KEY=VALUE` label of the host (repeatable)")
	f.IntVar(&o.Slots, "slots", 2, "execute up to `N` runs at once")
	f.StringVar(&o.Data, "data", "", "the host's data `DIR` (default: the data directory's worker/)")
	f.StringArrayVar(&o.OwnEnv, "own-env", nil, "fill variable `NAME` from this host's own environment where the server sends no value (repeatable; default: none, the server's values only)")
	f.StringArrayVar(&o.Backends, "backend", nil, "a sandbox `BACKEND` this host offers (repeatable; default: every isolating one that passes its preflight)")
	return c
}

func (app *App) runWorker(ctx context.Context, o *workerOptions) error {
	if app.Deps.SupervisorDeps == nil {
		return catalog.Internal.New("this build has no agent host")
	}
	data := o.Data
	if data == "" {
		data = filepath.Join(DataHome(app.Getenv), "worker")
	}
	data, err := filepath.Abs(data)
	if err == nil {
		err = os.MkdirAll(data, 0o700)
	}
	if err != nil {
		return catalog.Home.Wrap(err, "--data %s: %v", o.Data, err)
	}
	backends, err := app.workerBackends(ctx, o.Backends)
	if err != nil {
		return err
	}
	id, err := app.workerIdentity(ctx, o, data, backends)
	if err != nil {
		return err
	}
	cl, err := client.New(o.Server, id.Credential)
	if err != nil {
		return err
	}
	if err := id.RegisterSealKey(ctx, data, cl); err != nil {
		return err
	}
	key, err := id.Key()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(app.Stderr, nil))
	agents := strings.Join(submit.Installed(app.Deps.Agents, app.Getenv("PATH")), ",")
	fmt.Fprintf(app.Stderr, "agentrun worker: %s, %d slots, backends %s, agent CLIs %s, sealing key %s (data %s)\n", id, o.Slots,
		strings.Join(backends, ","), cmp.Or(agents, "none on PATH"), seal.Fingerprint(key.Public()), data)
	w := &worker.Remote{Client: cl, Data: data, Deps: app.Deps.SupervisorDeps, Slots: o.Slots, Backends: backends, Getenv: app.Getenv, Agents: app.Deps.Agents,
		HostID: id.HostID, Key: key, OwnEnv: o.OwnEnv,
		Sweepers: app.Deps.sweepers(app.Executable), Log: log}
	if err := w.Run(ctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// workerIdentity is the host's identity: the one kept in data, or a new
// one from the enrolment token.
func (app *App) workerIdentity(ctx context.Context, o *workerOptions, data string, backends []string) (*worker.Identity, error) {
	id, err := worker.LoadIdentity(data)
	if err != nil {
		return nil, err
	}
	if id != nil {
		if strings.TrimSuffix(o.Server, "/") != id.Server {
			return nil, catalog.Usage.New("%s joined %s, not %s", data, id.Server, o.Server).
				WithFix("give --server %s, or another --data DIR for another server", id.Server)
		}
		return id, nil
	}
	if o.TokenFile == "" {
		return nil, catalog.Usage.New("this host is not enrolled yet (no %s)", filepath.Join(data, "host.json")).
			WithFix("make a token on the server's host with 'agentrun server enrol-token' and give it with --enrol-token-file FILE")
	}
	token, err := readToken(o.TokenFile)
	if err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	labels := map[string]string{}
	for _, l := range o.Labels {
		k, v, _ := strings.Cut(l, "=")
		labels[k] = v
	}
	return worker.Enrol(ctx, data, o.Server, token, server.EnrolRequest{Name: name, Labels: labels, Slots: o.Slots, Backends: backends})
}

// workerBackends are the backends the host offers: those named, else
// every one whose preflight passes.
func (app *App) workerBackends(ctx context.Context, named []string) ([]string, error) {
	all := app.Deps.backends(app.Executable)
	var out []string
	for _, b := range app.Deps.Backends(app.Executable) {
		if len(named) > 0 {
			if slices.Contains(named, b.Name()) {
				out = append(out, b.Name())
			}
			continue
		}
		// A backend that isolates nothing (host) is offered only by name.
		if app.Deps.isolates(b.Name()) && b.Preflight(ctx) == nil {
			out = append(out, b.Name())
		}
	}
	for _, n := range named {
		if all[n] == nil {
			return nil, catalog.UnknownSandbox.New("--backend %q", n)
		}
	}
	if len(out) == 0 {
		return nil, catalog.Usage.New("no sandbox backend can start on this host").WithFix("run 'agentrun doctor' to see why")
	}
	return out, nil
}
