package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Deps are the seams the supervisor drives. The wiring (internal/wire)
// fills them with this build's implementations; the steps only call them.
type Deps struct {
	Store run.Store
	// Coord holds the run's lease, its place in the queue and its slot.
	Coord      coord.Coordinator
	Layout     layout.Layout
	Workspaces workspace.Provider
	// Overlay is the copy-on-write workspace provider, used where the
	// run's sandbox can mount it (nil: always Workspaces).
	Overlay workspace.Provider
	// CachedCopy makes the copy where there is no overlay from the layer
	// cache's checkout of the commit (nil: Workspaces), unless the run
	// asked for a copy by name.
	CachedCopy workspace.Provider
	// Layers is the layer cache, which holds the setup layers (nil: no
	// setup in this build).
	Layers   *workspace.LayerCache
	Export   func(ctx context.Context, cs *workspace.ChangeSet, opts workspace.ExportOptions) (*run.ExportResult, error)
	Backends map[string]sandbox.Backend
	// NewAgent makes the agent for the run; getenv reads the handed-off
	// environment (secrets stay in the supervisor); warn journals a
	// warning for the user; gw is the run's model gateway on the host
	// (nil: none).
	NewAgent func(r *run.Run, getenv func(string) string, warn func(string), gw *agent.Gateway) (agent.Agent, error)
	// PrepareHome fills a new run's HOME (hostHome, on the host) while
	// its sandbox starts, from what its agent keeps of a HOME it has run
	// in (templates: the layout's AgentHomes), and says what it did for
	// the journal (nil: nothing). Nil: HOME starts as the agent finds it.
	PrepareHome func(r *run.Run, hostHome, templates string) *run.Event
	// WaitHomeSpares waits for the spare HOMEs this process is making
	// (filling a HOME from a template makes the next one ahead, in the
	// background) and the syncs of the templates it saved: the
	// supervisor calls it before it exits. Nil: none.
	WaitHomeSpares func()
	// Capacity shares model servers' request slots among every run on
	// the machine.
	Capacity gateway.Capacity
	// StartEgress starts the egress proxy for the run on a unix socket,
	// going out as getenv's proxy variables say (gateway.NetEnv), and
	// returns a stop function.
	StartEgress func(ctx context.Context, r *run.Run, socket string, getenv func(string) string, onRecord func(egress.Record)) (stop func(context.Context) error, err error)
	// RecordWithin bounds the wait for the store to record an export
	// (0: DefaultRecordWithin); past it the branch goes back and the run
	// fails. A store across the network (an agent host's) waits longer:
	// its calls are retried until the server answers or the run's lease
	// is lost.
	RecordWithin time.Duration
}

// DefaultRecordWithin is how long an export waits for a local store to
// record it.
const DefaultRecordWithin = 10 * time.Second

func errMissing(what string) error { return fmt.Errorf("%s is not available in this build", what) }
