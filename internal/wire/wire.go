// Package wire chooses Lite mode's implementations, in this one place:
// the run store, the sandbox backends, the agent profiles, the model
// providers, the workspace provider, the egress proxy and the model
// servers' shared capacity. cmd/agentrun hands them to the CLI and the
// supervisor, which see only the seams. (wire imports neither cli nor
// cmd, so the CLI's tests can use it.) A new implementation is a
// new package that passes its seam's conformance suite, plus a line here.
package wire

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/external"
	"github.com/agentrun/agentrun/internal/agent/loop"
	"github.com/agentrun/agentrun/internal/agent/provider"
	providers "github.com/agentrun/agentrun/internal/agent/provider/all"
	"github.com/agentrun/agentrun/internal/audit/sqlaudit"
	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/coord/flock"
	"github.com/agentrun/agentrun/internal/coord/sqlcoord"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/queue/riverq"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/sandbox/all"
	"github.com/agentrun/agentrun/internal/sandbox/native"
	"github.com/agentrun/agentrun/internal/sandbox/native/warmstart"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/store/files"
	"github.com/agentrun/agentrun/internal/store/sqlstore"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/users/sqlusers"
	"github.com/agentrun/agentrun/internal/workspace"
)

// OpenStore opens the run store of data directory home: files (Lite).
func OpenStore(home string) (run.Store, error) { return files.Open(home) }

// Coordinator keeps the leases, the queue and the slots of data
// directory home: flocks (Lite).
func Coordinator(home string) coord.Coordinator { return flock.New(home) }

// Backends are the sandbox backends of this build, in help order.
func Backends(executable string) []sandbox.Backend {
	return all.List(all.Options{Executable: executable})
}

// Prewarm starts ahead, for the process's next sandbox of the backend
// named, what that backend can start before a sandbox's spec is known
// (sandbox.Prewarmer); it lasts until that sandbox takes it or the
// process exits. The native sandbox's init that a supervisor's
// initializer started on a guess (package warmstart) is ended when the
// backend is another ("": none).
func Prewarm(name string) {
	if name != native.Name {
		warmstart.Drop()
	}
	for _, b := range Backends("") {
		if p, ok := b.(sandbox.Prewarmer); ok && b.Name() == name {
			p.Prewarm(context.Background())
		}
	}
}

// DefaultBackend is the backend used when none is named (see all.Default).
func DefaultBackend() string { return all.Default() }

// Agents are the external agent CLI profiles.
func Agents() agent.Catalog { return external.Infos() }

// Providers are the built-in agent's model providers.
func Providers() provider.Registry { return providers.Providers() }

// Workspaces make the agents' trees from base commits: plain checkouts.
func Workspaces() workspace.Provider { return workspace.NewCheckout() }

// Supervisor builds the seams a detached supervisor drives for a run of
// data directory home.
func Supervisor(home string) (supervisor.Deps, error) {
	st, err := OpenStore(home)
	if err != nil {
		return supervisor.Deps{}, err
	}
	return SupervisorDeps(st, layout.Layout{Home: home}), nil
}

// SupervisorDeps are the supervisor's seams over store st, with Lite's
// coordinator (flocks under l.Home).
func SupervisorDeps(st run.Store, l layout.Layout) supervisor.Deps {
	return supervisorDeps(st, Coordinator(l.Home), l)
}

// OpenServer opens a team server's database at url (sqlite:PATH or
// postgres://...), brings its schema up to date, and returns the SQL run
// store and coordinator on it (Full mode), with o's lease TTL and log.
func OpenServer(ctx context.Context, url string, o server.BackendOptions) (*server.Backend, error) {
	db, err := sqldb.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	ms, err := sqldb.Migrations(db.Dialect)
	if err != nil {
		db.Close()
		return nil, err
	}
	latest := ms[len(ms)-1].Version
	// Every event a run's journal receives, whichever worker sends it, is
	// also an entry of the audit trail, written in the same transaction.
	// A cancel event also wakes the heartbeat of the run's host, if one
	// waits (its answer tells the host to cancel the run).
	trail := sqlaudit.New(db)
	audited, cancels := trail.RunEvents(server.EventActor), &server.Cancels{}
	st := sqlstore.New(db).WithEventHook(func(ctx context.Context, tx *sql.Tx, id string, e run.Event) error {
		if err := audited(ctx, tx, id, e); err != nil {
			return err
		}
		cancels.Event(id, e)
		return nil
	})
	// The dispatch queue is River's, its tables made by River's own
	// migrations beside ours.
	q, err := riverq.Open(ctx, db, url, riverq.Options{Log: o.Log})
	if err != nil {
		db.Close()
		return nil, err
	}
	co := sqlcoord.New(db, sqlcoord.Options{LeaseTTL: o.LeaseTTL})
	return &server.Backend{
		Store: st, Coord: co, Dialect: db.Dialect.String(), Audit: trail, Users: sqlusers.New(db),
		HostsDB: server.HostsDB{Read: db.Read(), Write: db.Write()}, HostLeases: co, Queue: q, Cancels: cancels,
		LeaseTTL:       cmp.Or(o.LeaseTTL, sqlcoord.DefaultLeaseTTL),
		SupervisorDeps: func(l layout.Layout) supervisor.Deps { return supervisorDeps(st, co, l) },
		Ready: func(ctx context.Context) error {
			v, err := db.Version(ctx)
			if err != nil {
				return err
			}
			if v != latest {
				return fmt.Errorf("the database schema is at version %d, this build's is %d", v, latest)
			}
			return nil
		},
		Close: func() error { return errors.Join(q.Close(), co.Close(), st.Close(), db.Close()) },
	}, nil
}

func supervisorDeps(st run.Store, co coord.Coordinator, l layout.Layout) supervisor.Deps {
	backends := map[string]sandbox.Backend{}
	for _, b := range Backends("") {
		backends[b.Name()] = b
	}
	layers := workspace.NewLayerCache(l.LayerCache())
	return supervisor.Deps{
		Store:  st,
		Coord:  co,
		Layout: l,
		// Where no overlay is mounted, a workspace is a copy of the
		// commit's cached checkout: git copies and checks out a commit
		// once per machine, not once per run.
		Workspaces:     workspace.NewLayerCopy(layers),
		Overlay:        workspace.NewOverlay(layers),
		Layers:         layers,
		Export:         workspace.Export,
		Backends:       backends,
		NewAgent:       NewAgent,
		PrepareHome:    external.PrepareHome,
		WaitHomeSpares: external.WaitSpares,
		StartEgress:    startEgress,
		Capacity:       gateway.FlockCapacity{Dir: l.Capacity()},
	}
}

// BuildSetup finds or makes the setup layer of the planned run r in the
// layer cache of data directory home, ahead of any run (agentrun setup).
func BuildSetup(ctx context.Context, r *run.Run, home, scratch string, event func(run.Event)) (workspace.SetupLayer, error) {
	return supervisor.BuildSetup(ctx, SupervisorDeps(nil, layout.Layout{Home: home}), r, scratch, event)
}

// NewAgent makes the agent of run r: the built-in loop (which runs in
// the supervisor, its keys never in the sandbox) or an external CLI
// profile or command (which runs in the sandbox).
func NewAgent(r *run.Run, getenv func(string) string, warn func(string), gw *agent.Gateway) (agent.Agent, error) {
	if r.Agent.Name == agent.BuiltinName {
		return loop.ForRun(r, loop.Options{Getenv: getenv, Warn: warn, Providers: Providers(),
			WindowCache: &loop.WindowCache{Dir: cacheDir()}}, gw)
	}
	return external.New(r.Agent)
}

// startEgress starts run r's egress proxy; an admitted connection goes
// through the proxy that getenv's variables name (gateway.NetEnv, the
// submitting user's or, on a team, the agent host's), as the user's own
// tools reach the network.
func startEgress(ctx context.Context, r *run.Run, socket string, getenv func(string) string, onRecord func(egress.Record)) (func(context.Context) error, error) {
	var up egress.Upstream
	if hn := gateway.ProxiesOf(getenv); len(hn.Proxies) > 0 {
		if hn.TLSProxy() {
			hn = gateway.NewHostNet(getenv) // its certificate is checked against the user's CAs too
			up.Roots = hn.Roots()
		}
		up.Func = func(scheme, host string, port int) (*url.URL, error) {
			return hn.Proxy(&url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))})
		}
	}
	return egress.StartProxy(ctx, r.Sandbox.Allow, socket, up, onRecord)
}

// cacheDir is agentrun's directory in the user's cache ("" when there is
// none: nothing is cached).
func cacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil || dir == "" {
		return ""
	}
	return filepath.Join(dir, "agentrun")
}
