package submit

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/policy"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/workspace"
)

// Service plans runs: the one home of submit's validation, called by the
// CLI (and, later, by the server). It holds what the wiring chose: the
// sandbox backends, the agent profiles and the model providers of this
// build. It creates nothing; its errors are catalog errors.
type Service struct {
	// Backends are the sandbox backends to choose from, by name.
	Backends map[string]sandbox.Backend
	// DefaultBackend is used when the request names none ("" = no
	// isolating backend on this platform).
	DefaultBackend string
	// CachePreflight remembers a backend's successful preflight for a few
	// minutes, in the user's cache directory of the request's environment
	// (this build's own backends; a test's stand-ins always preflight).
	CachePreflight bool
	Agents         agent.Catalog
	Providers      provider.Registry
	// Inspect reads the state of the repository a request names (nil:
	// the user's work tree, workspace.Inspect). A server names its own:
	// its project repositories are bare, hold only what clients sent, and
	// are never dirty. Errors are catalog errors.
	Inspect func(ctx context.Context, dir, ref string) (path, base string, dirty bool, err error)
	// Mode is the mode recorded in provenance ("" = lite).
	Mode string
	// Policy is the organization policy in force (nil: none): Plan
	// applies it to the planned run and refuses a run outside it.
	Policy *policy.Org
}

// Request is a validated-syntax submit: flags parsed, task read. Plan
// checks everything else against the machine and the repository.
type Request struct {
	Repo string // directory inside the repository
	// Subdir, when set, is where the agent and the checks start, relative
	// to the repository's top (a team server's client sends it): it
	// replaces Repo's place in the repository.
	Subdir       string
	BaseRef      string // default HEAD
	Task         string
	AgentName    string // profile name or "builtin"; "" with AgentCmd
	AgentCmd     string
	Builtin      run.AgentSpec // model settings for the built-in agent
	EnvNames     []string      // --env
	Checks       []run.CheckSpec
	Attempts     int
	Timeout      time.Duration
	Sandbox      string // "" = default backend
	Network      string // "" = the agent's default
	Allow        []string
	LoopbackTCP  bool // processes may connect to servers on the sandbox's own loopback
	IncludeDirty bool
	Export       run.ExportConfig
	Limits       run.Limits // sandbox limits; zero fields: the backend's defaults
	Version      string     // agentrun version, for provenance
	// Getenv reads the submitting environment (PATH, key variables).
	Getenv func(string) string
	// Models: model, model server, budgets, config entries.
	Models ModelRequest
	// ReadOnly are extra host paths made visible read-only (--ro).
	ReadOnly []string
	// Image is the image of a backend that runs images (docker), as the
	// user named it; ImagePins pin tags to digests (the config's
	// [images]). ImageNamed: the request itself names it (not a default
	// of the config), so a backend without images refuses it.
	Image      string
	ImagePins  map[string]string
	ImageNamed bool
	// Setup is the setup command (--setup; "": the repository's
	// .agentrun.toml at the base commit, if any); NoSetup runs none.
	// SetupAllow is the setup's egress allowlist (the user's only).
	Setup      string
	NoSetup    bool
	SetupAllow []string
	// Toolchains name the host's toolchain caches the run reads.
	Toolchains []string
	// Workspace is what the run asks of its workspace: the mode (auto,
	// copy, overlay), the history (shallow, full), the files to include.
	Workspace run.WorkspaceSpec
	// Data is the data directory, where the runs and the layer cache are
	// (nil: no checks that need it, the overlay probe and the disk
	// budget, are made).
	Data *layout.Layout
	// Commits, when set, answers what the plan asks of the base commit
	// (its .agentrun.toml, the size of its checkout) from what an earlier
	// submit learned, and keeps what this one learns; it writes nothing
	// before its caller's Keep, once the run is made (a refused submit
	// changes nothing).
	Commits *workspace.CommitCache
	// DiskBudget bounds the runs' workspaces and the layer cache together
	// (0: no budget).
	DiskBudget int64
	// HostHas, on a team server, reports whether an agent host said it
	// has profile's CLI: a profile's CLI missing from this machine's PATH
	// is then found on the host's at the run's start (nil: it must be
	// here).
	HostHas func(ctx context.Context, profile string) bool
	// AnyHost, on a team server, reports whether an agent host (revoked
	// ones aside) is enrolled: an agent command whose program is not on
	// this machine's PATH is then left to the hosts (nil: it must be
	// here).
	AnyHost func(ctx context.Context) bool
	// OnHosts: the run executes on a team's agent hosts, never here, so
	// what only their network can answer (is the model server listening,
	// does it list the model) is not asked from this one: the run's first
	// request asks it there. Keys are still checked: they are this
	// machine's.
	OnHosts bool
}

// Plan validates req against the repository and the machine and returns
// the run record to create, plus warnings for the user. It creates
// nothing. Errors are catalog errors.
func (s *Service) Plan(ctx context.Context, req Request) (*run.Run, []string, error) {
	var warnings []string
	if err := validateTask(req.Task); err != nil {
		return nil, nil, err
	}
	if err := Validate(req); err != nil {
		return nil, nil, err
	}
	id := run.NewID()
	r := &run.Run{
		ID: id, State: run.StateQueued, Task: req.Task, BaseRef: req.BaseRef,
		Branch: run.BranchName(id), Checks: req.Checks, MaxAttempts: req.Attempts,
		Timeout: run.Duration(req.Timeout), Export: req.Export,
	}
	if r.BaseRef == "" {
		r.BaseRef = "HEAD"
	}
	if req.Getenv == nil {
		req.Getenv = os.Getenv
	}
	// Agent, model gateway and network.
	ap, err := s.planAgent(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	r.Agent, warnings = ap.spec, ap.warnings
	if gw := ap.gw; gw != nil {
		gw.MaxTokens, gw.MaxCost, gw.Prices = req.Models.MaxTokens, req.Models.MaxCost, req.Models.Prices
		r.Gateway = gw
		warnings = append(warnings, priceWarnings(r)...)
	}
	r.Sandbox.Network = ap.network
	r.Sandbox.LoopbackTCP = req.LoopbackTCP
	r.Sandbox.Limits = req.Limits
	if r.Sandbox.ReadOnlyPaths, err = readOnlyPaths(ap.visible, req.ReadOnly); err != nil {
		return nil, nil, err
	}
	if ap.network == string(sandbox.NetworkAllowlist) {
		w, err := planAllow(r, r.Agent.Hosts, req)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
	}
	name := cmp.Or(req.Sandbox, s.DefaultBackend)
	b, info, sbWarnings, repoErr, err := s.backendAndRepo(ctx, name, req.Repo, r.BaseRef, sandbox.Limits(r.Sandbox.Limits), s.preflightCacheDir(req.Getenv))
	if err != nil {
		return nil, nil, err
	}
	r.Sandbox.Backend = name
	img, err := planImage(ctx, b, name, req)
	if err != nil {
		return nil, nil, err
	}
	r.Sandbox.Image = img.ID
	warnings = append(warnings, sbWarnings...)
	if err := cmp.Or(repoErr, ap.modelCheck()); err != nil {
		return nil, nil, err
	}
	r.Repo, r.Base = info.Path, info.Base
	if r.Subdir, err = planSubdir(ctx, req, info); err != nil {
		return nil, nil, err
	}
	checkout := estimateCheckout(ctx, req, b, r)
	w, err := planEnvironment(ctx, req, r)
	if err != nil {
		return nil, nil, err
	}
	warnings = append(warnings, w...)
	if w, err := planDirty(req, info, r); err != nil {
		return nil, nil, err
	} else if w != "" {
		warnings = append(warnings, w)
	}
	// The workspace before the policy's digest: full history widens what
	// the sandbox shows read-only.
	included, err := s.planWorkspace(ctx, req, b, r)
	if err != nil {
		return nil, nil, err
	}
	if len(req.Workspace.Include) > 0 && len(included) == 0 {
		warnings = append(warnings, f("include")+" matched no git-ignored file of the working tree: nothing is included")
	}
	// The organization policy fills what the run leaves open before the
	// effective policy's digest, and refuses it before anything is made.
	s.Policy.Apply(r)
	host, _ := os.Hostname()
	r.Provenance = run.Provenance{
		Version: req.Version, Host: host, Mode: cmp.Or(s.Mode, "lite"), Sandbox: name, BaseCommit: r.Base,
		AgentCommand: agentCommand(r.Agent), PolicyDigest: policy.FromRun(r).Digest(), OrgPolicyDigest: s.Policy.Digest(),
		Image: img.Ref, ImageID: img.ID, ImageDigests: img.Digests, Included: included,
	}
	if err := s.Policy.Check(r); err != nil {
		return nil, nil, err
	}
	if err := planDisk(ctx, req, b, r, checkout); err != nil {
		return nil, nil, err
	}
	return r, warnings, nil
}

// planSubdir is where the run's agent and checks start (run.Run.Subdir):
// the directory the request names, else Repo's place in the repository.
func planSubdir(ctx context.Context, req Request, info repoInfo) (string, error) {
	if req.Subdir != "" {
		return namedSubdir(ctx, info.Path, info.Base, req.Subdir)
	}
	return Subdir(info.Path, req.Repo), nil
}

// planDirty refuses a repository with uncommitted changes unless the
// request accepts them, and then records them and says what it means.
func planDirty(req Request, info repoInfo, r *run.Run) (warning string, err error) {
	if !info.Dirty {
		return "", nil
	}
	if !req.IncludeDirty {
		return "", catalog.DirtyRepo.New("%s has uncommitted changes", info.Path)
	}
	r.Dirty = true
	return fmt.Sprintf("the repository has uncommitted changes; the run starts from %s without them", short(r.Base)), nil
}

// sandboxWarnings are what the backend called name will not do for a
// run with limits lim: limits it cannot hold here, or no isolation at
// all.
func sandboxWarnings(ctx context.Context, b sandbox.Backend, name string, lim sandbox.Limits) []string {
	var warnings []string
	if lw, ok := b.(sandbox.LimitWarner); ok {
		if w := lw.LimitWarnings(ctx, lim); len(w) > 0 {
			warnings = append(warnings, name+" sandbox: not in force on this machine: "+strings.Join(w, "; "))
		}
	}
	if b.Isolation().None() {
		warnings = append(warnings, f("sandbox")+" "+name+" does not isolate: the agent runs as you, with your files and your network")
	}
	return warnings
}

// planEnvironment plans r's setup snapshot and the toolchain caches it
// reads, and returns their warnings.
func planEnvironment(ctx context.Context, req Request, r *run.Run) ([]string, error) {
	// The base's files read below, in one git process where the commit
	// cache does not answer them.
	read := []string{submodulesFile}
	if !req.NoSetup {
		read = append(read, RepoConfigName)
	}
	req.Commits.Prefetch(ctx, r.Repo, r.Base, read...)
	setup, warnings, err := planSetup(ctx, req, r.Repo, r.Base)
	if err != nil {
		return nil, err
	}
	r.Setup = setup
	tc, w, err := planToolchains(req.Toolchains, req.Getenv)
	if err != nil {
		return nil, err
	}
	r.Sandbox.Toolchains = tc
	if sw := submoduleWarning(ctx, req.Commits, r.Repo, r.Base); sw != "" {
		warnings = append(warnings, sw)
	}
	return append(warnings, w...), nil
}

// planAllow sets r's allowlist (the profile's hosts and the request's
// entries, canonical) and warns of the request's loopback entries that
// the sandbox does not reach at their address.
func planAllow(r *run.Run, hosts []string, req Request) ([]string, error) {
	var err error
	if r.Sandbox.Allow, err = canonicalAllow(slices.Concat(hosts, req.Allow)); err != nil {
		return nil, err
	}
	if w := loopbackWarning(f("allow"), req.Allow); w != "" {
		return []string{w}, nil
	}
	return nil, nil
}

// loopbackWarning is the warning for the entries of allow (given with
// flag) that name this machine's loopback in a way the sandbox does not
// reach at that same address (egress.HostLoopback); "" for none.
func loopbackWarning(flag string, allow []string) string {
	_, other := egress.HostLoopback(allow)
	if len(other) == 0 {
		return ""
	}
	return fmt.Sprintf("%s %s names this machine's loopback, which the sandbox reaches at the same address only as one IPv4 address and one port (127.0.0.1:5432); "+
		"as given, only a client that goes through HTTP_PROXY for it reaches it (NO_PROXY keeps loopback clients direct)", flag, strings.Join(other, ", "))
}

// readOnlyPaths are the host paths made visible read-only: what the agent
// needs (visible) and what the request names, absolute and existing.
func readOnlyPaths(visible, named []string) ([]string, error) {
	for _, p := range named {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, catalog.BadPath.Wrap(err, "%s %s: %v", f("ro"), p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, catalog.BadPath.Wrap(err, "%s %s: %v", f("ro"), p, err)
		}
		visible = append(visible, abs)
	}
	slices.Sort(visible)
	return slices.Compact(visible), nil
}

// backendAndRepo picks the sandbox backend (named, configured, or the
// platform default; never one that isolates nothing unless named) and
// preflights it, while the repository is inspected (git processes) and
// the backend's warnings for a run with lim are worked out, side by side.
// A preflight failure is err; the repository's is repoErr, for the caller
// to report after the backend's warnings.
func (s *Service) backendAndRepo(ctx context.Context, name, repo, ref string, lim sandbox.Limits, cache string) (b sandbox.Backend, info repoInfo, warnings []string, repoErr, err error) {
	backends := s.Backends
	if name == "" {
		return nil, info, nil, nil, catalog.NoSandbox.New("no isolating sandbox backend is available in this build")
	}
	b, ok := backends[name]
	if !ok {
		return nil, info, nil, nil, catalog.UnknownSandbox.New("%q is not one of: %s", name, strings.Join(slices.Sorted(maps.Keys(backends)), ", "))
	}
	// The backend's preflight (which may probe the kernel), the
	// repository inspection (git processes) and what the backend will
	// not do for a run with lim (a native backend makes and removes
	// cgroups to tell: 3-6 ms) run side by side; a preflight that fails
	// still waits for the warnings, so nothing is left working behind.
	warned := make(chan []string, 1)
	go func(b sandbox.Backend) { warned <- sandboxWarnings(ctx, b, name, lim) }(b)
	defer func() { warnings = <-warned }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		info, repoErr = s.inspectRepo(ctx, repo, ref)
	}()
	var preErr error
	if cache != "" {
		preErr = cachedPreflight(ctx, b, name, cache)
	} else {
		preErr = b.Preflight(ctx)
	}
	<-done
	if preErr != nil {
		if _, ok := catalog.As(preErr); ok {
			return nil, info, nil, nil, preErr
		}
		return nil, info, nil, nil, catalog.SandboxPreflight.Wrap(preErr, "%s: %v", name, preErr)
	}
	return b, info, nil, repoErr, nil
}

// agentPlan is the run's agent, its gateway routes, the host paths it
// needs visible and its network; what waits for the answer of the user's
// model server on a profile's key and model (profileModelCheck; for
// anything else, nothing to wait for); and what to warn of.
type agentPlan struct {
	spec       run.AgentSpec
	gw         *run.GatewaySpec
	visible    []string
	network    string
	modelCheck func() error
	warnings   []string
}

// planAgent plans the run's agent (agentPlan).
func (s *Service) planAgent(ctx context.Context, req Request) (agentPlan, error) {
	var spec run.AgentSpec
	var warnings []string
	modelCheck := func() error { return nil }
	var gw *run.GatewaySpec
	var visible []string
	network := req.Network
	switch {
	case req.AgentCmd != "":
		spec = run.AgentSpec{Name: agent.CommandName, Command: req.AgentCmd}
		vis, err := CommandPreflight(req.AgentCmd, req.Getenv("PATH"))
		switch {
		case err == nil:
			visible = vis
		case req.OnHosts: // (on a team's hosts: theirs to find)
		case req.AnyHost != nil && req.AnyHost(ctx):
			// Not on this server's PATH: its own worker leaves the run to
			// the agent hosts, each of which looks the program up on its
			// own PATH at the run's start.
			warnings = append(warnings, fmt.Sprintf("the agent command's program %q is not on this server's PATH: the run goes to an agent host, which fails it at its start if the program is not on its PATH either", strings.Fields(req.AgentCmd)[0]))
		default:
			return agentPlan{}, err
		}
		if req.Models.Model != "" && req.Models.Server == "" {
			return agentPlan{}, catalog.UnsupportedFlag.New("%s with %s names a model for the model gateway, which an agent command gets only with %s", f("model"), f("agent_cmd"), f("model_server")).
				WithFix("add %s URL (the command then gets AGENTRUN_MODEL and the gateway's URLs), or drop %s", f("model_server"), f("model"))
		}
		for _, name := range req.Models.BuiltinFields {
			return agentPlan{}, catalog.UnsupportedFlag.New("%s is a setting of the built-in agent; an agent command would ignore it", f(name))
		}
		if req.Models.Server != "" {
			// A command agent may speak any protocol to the user's model
			// server: every route goes there.
			gw = &run.GatewaySpec{}
			for _, name := range gateway.RouteNames {
				rs, err := planRoute(ctx, req, name, "agent command", nil)
				if err != nil {
					return agentPlan{}, err
				}
				gw.Routes = append(gw.Routes, rs)
			}
			spec.Model = req.Models.Model
		}
	case req.AgentName == agent.BuiltinName:
		spec = req.Builtin
		spec.Name = agent.BuiltinName
		if spec.Model == "" {
			spec.Model = req.Models.Model
		}
		kind, err := s.checkBuiltin(spec)
		if err != nil {
			return agentPlan{}, err
		}
		rs, err := builtinRoute(ctx, req, spec, kind)
		if err != nil {
			return agentPlan{}, err
		}
		if !req.OnHosts {
			if err := checkBuiltinModel(ctx, spec, rs, kind, req.Getenv); err != nil {
				return agentPlan{}, err
			}
		}
		gw = &run.GatewaySpec{Routes: []run.RouteSpec{rs}}
	case req.AgentName != "":
		p, ok := s.Agents.Lookup(req.AgentName)
		if !ok {
			return agentPlan{}, catalog.UnknownAgent.New("%q is not one of: %s, %s", req.AgentName, strings.Join(s.Agents.Names(), ", "), agent.BuiltinName)
		}
		var l Located
		var err error
		if spec, gw, l, err = planProfile(ctx, req, p); err != nil {
			return agentPlan{}, err
		}
		visible, warnings = l.Visible, append(warnings, l.Warnings()...)
		modelCheck = s.profileModelCheck(ctx, req, spec.Model, gw.Routes[0])
	default:
		return agentPlan{}, catalog.NoAgent.New("neither %s nor %s was given", f("agent"), f("agent_cmd"))
	}
	// The model goes through the gateway, which needs no network: every
	// agent starts with none; --allow opens the allowlist.
	if network == "" {
		network = string(sandbox.NetworkNone)
		if len(req.Allow) > 0 {
			network = string(sandbox.NetworkAllowlist)
		}
	}
	switch network {
	case string(sandbox.NetworkNone):
		if len(req.Allow) > 0 {
			return agentPlan{}, catalog.ConflictFlags.New("%s with %s none", f("allow"), f("network"))
		}
		spec.Hosts = nil
	case string(sandbox.NetworkAllowlist):
	default:
		return agentPlan{}, catalog.BadNetwork.New("%q", network)
	}
	spec.Env = mergeNames(spec.Env, req.EnvNames)
	return agentPlan{spec: spec, gw: gw, visible: visible, network: network, modelCheck: modelCheck, warnings: warnings}, nil
}

// builtinRoute is the built-in agent's gateway route: --base-url (or
// --model-server) when given; else, for openai, LM Studio's local server,
// and for anthropic, Anthropic's API.
func builtinRoute(ctx context.Context, req Request, spec run.AgentSpec, kind provider.Kind) (run.RouteSpec, error) {
	route := kind.Route
	server := cmp.Or(spec.BaseURL, req.Models.Server)
	if server == "" && route == gateway.RouteOpenAI {
		server = openaiLocalDefault
	}
	if server == "" {
		return planRoute(ctx, req, route, "built-in agent", nil)
	}
	req.Models.Server = server
	rs, err := serverRoute(req.Models, route)
	if err != nil {
		return rs, err
	}
	if err := reachable(ctx, req, rs.URL); err != nil {
		return rs, catalog.ModelUnreachable.Wrap(err, "%s: %v", rs.URL, err)
	}
	if len(rs.Keys) == 0 {
		// An OpenAI-compatible server that wants a key gets the usual one
		// when it is set (a hosted API through --base-url).
		pub, _ := gateway.Public(route)
		for _, k := range pub.Keys {
			if req.Getenv(k.Env) != "" {
				rs.Keys = []run.KeySource{k}
				break
			}
		}
		if route == gateway.RouteAnthropic && len(rs.Keys) == 0 && !isLoopbackURL(rs.URL) {
			return rs, catalog.NoKey.New("the built-in agent reaches %s, and ANTHROPIC_API_KEY is not set", rs.URL)
		}
	}
	if ok, tried := gateway.Available(rs, req.Getenv); !ok {
		return rs, catalog.NoKey.New("model server %s: its key comes from %s, which gives none", rs.Server, strings.Join(tried, ", "))
	}
	return rs, nil
}

// openaiLocalDefault is the built-in agent's default server: LM Studio.
const openaiLocalDefault = "http://localhost:1234"

func isLoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// priceWarnings warns when --max-cost is set and a public API's model has
// no known price.
func priceWarnings(r *run.Run) []string {
	if r.Gateway.MaxCost <= 0 || r.Agent.Model == "" {
		return nil
	}
	var w []string
	for _, rs := range r.Gateway.Routes {
		if rs.Server != "" {
			continue
		}
		if _, ok := (gateway.Prices{Overrides: r.Gateway.Prices}).Lookup(r.Agent.Model); !ok {
			w = append(w, fmt.Sprintf("no price is known for model %q: "+f("max_cost")+" counts it as free; add [prices.%q] (US dollars per million tokens) to config.toml", r.Agent.Model, r.Agent.Model))
		}
	}
	return w
}

func agentCommand(a run.AgentSpec) string {
	if a.Name == agent.BuiltinName {
		return strings.Trim(fmt.Sprintf("builtin %s %s", a.Provider, a.Model), " ")
	}
	return a.Command
}

func mergeNames(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// planImage resolves the request's image with a backend that runs images;
// a backend without images refuses one named by the request itself (a
// config default is for the backends that take it).
func planImage(ctx context.Context, b sandbox.Backend, name string, req Request) (sandbox.Image, error) {
	ir, ok := b.(sandbox.ImageResolver)
	if !ok {
		if req.ImageNamed {
			return sandbox.Image{}, catalog.UnsupportedFlag.New("%s names an image; the %s sandbox runs none", f("image"), name).
				WithFix("drop %s, or choose a backend that runs images (%s docker)", f("image"), f("sandbox"))
		}
		return sandbox.Image{}, nil
	}
	return ir.ResolveImage(ctx, req.Image, req.ImagePins)
}
