package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/worker"
)

type serverOptions struct {
	Listen      string
	ListenAny   bool
	Data        string
	DatabaseURL string
	TokenFile   string
	TLSCert     string
	TLSKey      string
	LocalWorker int // -1: the default (on with SQLite)
	LeaseTTL    time.Duration
	MaxBundle   int64
	AllowHost   bool
	PassEnv     []string
	Policy      string
	// AuditEvery and AuditInterval: a checkpoint every so many entries
	// or so much time, whichever comes first.
	AuditEvery    int64
	AuditInterval time.Duration
}

// Validate refuses a non-loopback address without --listen-any, and any
// non-loopback listen without a token: whoever reaches the server can
// start runs.
func (o *serverOptions) Validate() error {
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return catalog.Usage.New("--listen %q: want HOST:PORT, like 127.0.0.1:8080", o.Listen)
	}
	switch {
	case !loopbackHost(host) && !o.ListenAny:
		return serverNotLoopback(o.Listen)
	case !loopbackHost(host) && o.TokenFile == "":
		return catalog.Usage.New("--listen %s is not a loopback address and no --token-file was given", o.Listen).
			WithFix("give --token-file FILE (a secret of your choosing; clients send it as 'Authorization: Bearer TOKEN')")
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return catalog.ConflictFlags.New("--tls-cert and --tls-key go together")
	case o.AuditEvery < 1 || o.AuditInterval <= 0:
		return catalog.Usage.New("--audit-every %d, --audit-interval %s: a checkpoint needs at least one entry and a positive interval", o.AuditEvery, o.AuditInterval)
	case o.LocalWorker < -1:
		return catalog.Usage.New("--local-worker %d: the runs it executes at once, 0 for none", o.LocalWorker)
	}
	return nil
}

func serverNotLoopback(addr string) error {
	return catalog.Usage.New("--listen %s is not a loopback address: whoever reaches the server can start runs with its keys on its hosts", addr).
		WithFix("listen on 127.0.0.1:PORT, or pass --listen-any with --token-file FILE (and TLS, or a reverse proxy that terminates it)")
}

func (app *App) newServerCmd() *cobra.Command {
	o := &serverOptions{}
	c := &cobra.Command{
		Use:   "server [--listen ADDR] [--data DIR] [--database-url URL] [--local-worker N]",
		Short: "Serve the team server's HTTP API (Full mode, preview)",
		Long: `Serve the team server: an HTTP API under /v1 (the document is served at
/v1/openapi.json and kept in docs/openapi.json) for submit, list, status,
logs (also followed as Server-Sent Events), result, diff, the result branch
as a git bundle, cancel, resume, verdict and egress, plus /healthz, /readyz
and /metrics (Prometheus). Every answer about runs is the --json document of
the command of the same name; every error is the error catalog's. A web UI
is served at /ui/ (runs, live logs, diffs, verdicts, a submit form); with
--token-file its sign-in page takes the token.

The server keeps its runs under --data DIR (default: the data directory's
"server" directory): the run directories, and one bare git repository per
project under projects/, holding the base commits clients sent as bundles
and the agentrun/<id> branches their runs exported. Its records, queue and
leases are in SQLite (DIR/agentrun.db) unless --database-url
postgres://... names PostgreSQL.

--local-worker N executes up to N queued runs at once on this host, with
the same supervisor as 'agentrun submit' (default 2 with SQLite, 0 with
PostgreSQL, where agent hosts join). Agent hosts join with 'agentrun
worker --server URL' and a one-time token from 'agentrun server
enrol-token'; 'agentrun server hosts' lists them and 'agentrun server
revoke-host ID' revokes one. The server holds the lease of each run a host
executes and renews it only while the host heartbeats: a host silent past
the lease TTL loses its runs, which are queued again for another host. Runs survive a restart of the
server: a run whose server stopped is marked interrupted and is resumable.
SIGTERM or SIGINT stops accepting, drains the requests in flight, and
leaves the runs being executed interrupted, resumable.

The server listens on loopback unless --listen-any; any other address
needs --token-file FILE, whose content every request must send as
'Authorization: Bearer TOKEN' (/healthz and /readyz excepted). Serve TLS
with --tls-cert and --tls-key, or put a reverse proxy that terminates TLS
in front. Logs are JSON lines on stderr.

Every state-changing request and every run event is appended to the
server's audit trail, a hash chain in its database; every --audit-every
entries or --audit-interval, and at shutdown, the server signs a checkpoint
with its key, DIR/audit.key (made on first start, mode 0600). 'agentrun
server audit-key' prints the public key to pin; 'agentrun audit verify'
checks the trail with it.

A client chooses its run's sandbox among the isolating ones; the host
sandbox (none) only with --allow-host-sandbox. Its agent gets the server's
variables that its spec's env names only where --pass-env names them too.

--policy FILE holds every submit and resume to an organization policy (see
'agentrun policy --help'); a file that cannot be read stops the server
from starting. Without it, the policy named by config.toml or
AGENTRUN_POLICY, if any, is in force.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return app.runServer(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "serve on this `ADDR` (HOST:PORT; port 0 picks one, printed on stderr)")
	f.BoolVar(&o.ListenAny, "listen-any", false, "allow a --listen address that is not loopback (needs --token-file)")
	f.StringVar(&o.Data, "data", "", "the server's data `DIR` (default: the data directory's server/)")
	f.StringVar(&o.DatabaseURL, "database-url", "", "the database `URL`: postgres://... (or sqlite:PATH) instead of SQLite in the data directory")
	f.StringVar(&o.TokenFile, "token-file", "", "require the bearer token in this `FILE` on every request")
	f.StringVar(&o.TLSCert, "tls-cert", "", "serve TLS with this certificate `FILE` (PEM)")
	f.StringVar(&o.TLSKey, "tls-key", "", "the TLS key `FILE` (PEM)")
	f.IntVar(&o.LocalWorker, "local-worker", -1, "execute up to `N` runs at once on this host (0: none; -1: 2 with SQLite, 0 with PostgreSQL)")
	f.DurationVar(&o.LeaseTTL, "lease-ttl", 0, "how long a run's lease outlives its holder (tests)")
	f.BoolVar(&o.AllowHost, "allow-host-sandbox", false, "let clients ask for the host sandbox (no isolation: their agents run as this server's user)")
	f.StringArrayVar(&o.PassEnv, "pass-env", nil, "a `NAME` of this server's variables that clients may pass to their agents (repeatable)")
	f.Int64Var(&o.MaxBundle, "max-bundle", server.DefaultMaxBundle, "refuse bundles over this many `BYTES`")
	f.StringVar(&o.Policy, "policy", "", "hold every submit and resume to the organization policy `FILE` (default: policy in config.toml, AGENTRUN_POLICY)")
	f.Int64Var(&o.AuditEvery, "audit-every", 100, "sign an audit checkpoint after this many `N` entries")
	f.DurationVar(&o.AuditInterval, "audit-interval", time.Minute, "sign an audit checkpoint at least this often (`DURATION`) while entries come")
	_ = f.MarkHidden("lease-ttl")
	c.AddCommand(app.newServerAuditKeyCmd())
	c.AddCommand(app.newServerUsersCmd())
	c.AddCommand(app.newServerHostCmds()...)
	return c
}

// serverCommands are the command lines the server runs for its API.
var serverCommands = map[string]bool{"submit": true, "list": true, "status": true, "logs": true, "result": true,
	"diff": true, "cancel": true, "resume": true, "verdict": true, "egress": true, "mcp tail": true}

func (app *App) runServer(ctx context.Context, o *serverOptions) error {
	if app.Deps.OpenServer == nil {
		return catalog.Internal.New("this build has no team server")
	}
	data, err := app.serverData(o)
	if err != nil {
		return err
	}
	url := o.DatabaseURL
	if url == "" {
		url = "sqlite:" + filepath.Join(data, "agentrun.db")
	}
	token, err := readToken(o.TokenFile)
	if err != nil {
		return err
	}
	key, err := audit.LoadOrCreateKey(data)
	if err != nil {
		return catalog.Home.Wrap(err, "the server's audit key: %v", err)
	}
	// The log comes first: the queue opened with the database logs
	// River's warnings and errors to it.
	log := slog.New(slog.NewJSONHandler(app.Stderr, nil))
	be, err := app.Deps.OpenServer(ctx, url, server.BackendOptions{LeaseTTL: o.LeaseTTL, Log: log})
	if err != nil {
		return catalog.Home.Wrap(err, "the server's database: %v", err).WithFix("check --database-url and that the database is reachable")
	}
	defer be.Close()
	seals := &audit.Checkpointer{Log: be.Audit, Signer: key, Every: o.AuditEvery, Interval: o.AuditInterval, Logger: log}
	seals.Start()
	// On the way out early (the listen failed); a second Stop only seals.
	defer func() { _ = seals.Stop(context.WithoutCancel(ctx)) }()
	settings, cfgErr := config.Load(app.Getenv)
	if err := app.fixServerPolicy(o, settings, cfgErr, log); err != nil {
		return err
	}
	l := layout.Layout{Home: data}
	sweepers := app.Deps.sweepers(app.Executable)
	env := &Env{Home: data, Layout: l, Store: be.Store, Coord: be.Coord, Settings: settings, settingsErr: cfgErr, Claimed: true, Sweepers: sweepers}
	projects := &server.Projects{Dir: filepath.Join(data, "projects"), MaxBundle: o.MaxBundle, Log: log}
	if err := projects.Sweep(); err != nil {
		return catalog.Home.Wrap(err, "%s: %v", projects.Dir, err)
	}
	slots := localSlots(o, be.Dialect)
	var w *worker.Local
	metrics := server.NewMetrics(be.Store, slots, func() int { return w.Running() })
	// With no slots the worker only reconciles: runs whose host died are
	// marked interrupted all the same.
	hosts := newHosts(app, be, data, projects)
	hosts.Log, env.Remote, env.Waiting = log, hosts.Remote, hosts.Waiting
	hosts.LocalWorker, hosts.Agents = slots > 0, app.Deps.Agents
	// A profile's CLI may be on an agent host's PATH only; with no local
	// worker, the model server is the hosts' to reach.
	env.HostHas, env.AnyHost, env.OnHosts = hosts.HostHas, hosts.AnyHost, slots == 0
	// The provider keys are the server's: its hosts get them sealed.
	hosts.Getenv = app.Getenv
	metrics.WatchHosts(hosts)
	w = &worker.Local{Home: supervisor.Home{Store: be.Store, Coord: be.Coord, Layout: l, Claimed: true, Sweepers: sweepers, Remote: hosts.Remote},
		Deps: be.SupervisorDeps(l), Slots: slots, Getenv: app.Getenv, Agents: app.Deps.Agents, Log: log,
		Claimed: func(_ *run.Run, waited time.Duration) { metrics.Dispatched(waited) }, Queue: be.Queue, Queued: hosts.Enqueue}
	if err := w.Start(ctx); err != nil {
		return err
	}
	// The queue hands runs to the hosts' claims and to the local worker
	// from here on; the runs queued while no server ran are swept in.
	if err := hosts.StartQueue(ctx); err != nil {
		return catalog.Home.Wrap(err, "the server's queue: %v", err)
	}
	go hosts.Watch(ctx)
	queued := hosts.Enqueue
	quota, err := serverUsers(ctx, be, token, settings)
	if err != nil {
		return err
	}
	srv := server.New(server.Options{Exec: app.serverExec(env), Projects: projects, Ready: be.Ready, Metrics: metrics, Token: token, Log: log, Submitted: queued, Hosts: hosts,
		Isolates: app.Deps.isolates, AllowUnisolated: o.AllowHost, PassEnv: o.PassEnv,
		Audit: be.Audit, AuditKey: key.Public(),
		Store: be.Store, Users: be.Users, Quota: quota, Attempts: settings.Attempts,
		Policy: server.NewPolicyDoc(app.Deps.Policy, serverPolicySource(o, app.Getenv, settings))})
	ln, err := serverListen(o, token)
	if err != nil {
		return err
	}
	scheme := "http"
	if o.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(app.Stderr, "agentrun server: serving %s://%s/ (data %s, %s, local worker %d)\n", scheme, ln.Addr(), data, be.Dialect, slots)
	log.Info("serving", "addr", ln.Addr().String(), "data", data, "database", be.Dialect, "local_worker", slots)
	serr := srv.Serve(ctx, ln, o.TLSCert, o.TLSKey)
	log.Info("stopping: requests drained; stopping the runs being executed (they end interrupted, resumable)")
	stopServer(ctx, log, be.Queue, w, projects, seals)
	log.Info("stopped")
	if serr != nil {
		return catalog.Internal.Wrap(serr, "serve: %v", serr)
	}
	return nil
}

// stopper is what stopServer stops.
type stopper interface {
	Stop(ctx context.Context) error
}

// stopServer stops what serves the runs once the requests have drained:
// the queue (the jobs it holds go back to its table, for the next start),
// the local worker (its runs end interrupted, resumable), the projects'
// roll-ups of their packs, then the audit trail's last checkpoint, which
// seals the entries of the runs just stopped.
func stopServer(ctx context.Context, log *slog.Logger, q, w, projects, seals stopper) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), server.ShutdownTimeout)
	defer cancel()
	if err := q.Stop(sctx); err != nil {
		log.Error("stop queue", "error", err.Error())
	}
	if err := w.Stop(sctx); err != nil {
		log.Error("stop worker", "error", err.Error())
	}
	if err := projects.Stop(sctx); err != nil {
		log.Error("stop the projects' pack roll-ups", "error", err.Error())
	}
	if err := seals.Stop(sctx); err != nil {
		log.Error("audit checkpoint at shutdown", "error", err.Error())
	}
}

// localSlots is how many runs the server's own worker executes at once:
// --local-worker, else 2 with SQLite (one host) and 0 with PostgreSQL
// (agent hosts join).
func localSlots(o *serverOptions, dialect string) int {
	if o.LocalWorker >= 0 {
		return o.LocalWorker
	}
	if strings.EqualFold(dialect, "sqlite") {
		return 2
	}
	return 0
}

// serverListen listens on --listen, and refuses an address that turned
// out not to be loopback without --listen-any and a token.
func serverListen(o *serverOptions, token string) (net.Listener, error) {
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, catalog.Usage.Wrap(err, "--listen %s: %v", o.Listen, err).WithFix("pick a free port (0 picks one)")
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && (!o.ListenAny || token == "") {
		ln.Close()
		return nil, serverNotLoopback(ln.Addr().String())
	}
	return ln, nil
}

// serverData is the server's data directory, absolute and made.
func (app *App) serverData(o *serverOptions) (string, error) {
	data := o.Data
	if data == "" {
		data = filepath.Join(DataHome(app.Getenv), "server")
	}
	abs, err := filepath.Abs(data)
	if err == nil {
		err = os.MkdirAll(abs, 0o700)
	}
	if err != nil {
		return "", catalog.Home.Wrap(err, "--data %s: %v", data, err)
	}
	return abs, nil
}

// readToken reads the bearer token ("" without a file).
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	tok := strings.TrimSpace(string(b))
	if err == nil && (tok == "" || strings.ContainsAny(tok, " \t\r\n")) {
		err = fmt.Errorf("want one token without spaces")
	}
	if err != nil {
		return "", catalog.Usage.Wrap(err, "--token-file %s: %v", path, err)
	}
	return tok, nil
}

// serverExec runs one command line for the API in process, as mcpExec
// does, against the server's own data directory, store and coordinator:
// its runs are claimed by workers, and submit reads the server's bare
// project repositories.
func (app *App) serverExec(env *Env) func(ctx context.Context, args []string, stdin io.Reader) ([]byte, []byte, int) {
	deps := app.Deps
	deps.InspectRepo, deps.Mode = server.ResolveBare, "server"
	return func(ctx context.Context, args []string, stdin io.Reader) ([]byte, []byte, int) {
		var out, errb bytes.Buffer
		sub := &App{Stdin: stdin, Stdout: &out, Stderr: &errb, Getenv: app.Getenv, Executable: app.Executable, Deps: deps, env: env, local: true}
		return inProcess(ctx, sub, &out, &errb, args, serverCommands, "the server")
	}
}
