package submit

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/run"
)

// ModelRequest is what submit was told about models: flags over the
// environment over config.toml.
type ModelRequest struct {
	Model string
	// Server is --model-server: a [model_servers] name or a URL ("" =
	// the provider's public API).
	Server string
	// Servers, Providers and Prices are config.toml's entries.
	Servers   map[string]config.ModelServer
	Providers map[string]config.Provider
	Prices    map[string]run.Price
	MaxTokens int64
	MaxCost   float64
	// BuiltinFields names the built-in agent's settings that were given
	// (provider, base_url, max_turns, context_window, temperature):
	// refused with another agent, which cannot honour them.
	BuiltinFields []string
}

// systemDirs are visible in every isolating sandbox already.
var systemDirs = []string{"/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin"}

func underSystem(p string) bool {
	for _, d := range systemDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// planProfile fills spec for profile p: the CLI and its helpers found on
// the submitting PATH (with what they need made visible, and warnings for
// helpers found nowhere), the model, the session and the gateway route.
func planProfile(ctx context.Context, req Request, p agent.Info) (run.AgentSpec, *run.GatewaySpec, Located, error) {
	var spec run.AgentSpec
	for _, name := range req.Models.BuiltinFields {
		return spec, nil, Located{}, catalog.UnsupportedFlag.New("%s is a setting of the built-in agent; the %s profile would ignore it", f(name), p.Name)
	}
	spec = run.AgentSpec{Name: p.Name, Hosts: p.Hosts, Model: req.Models.Model}
	l, err := LocateProfile(p, req.Getenv)
	switch {
	case err == nil:
		spec.Binary, spec.Launcher, spec.Helpers = l.Binary, l.Launcher, l.Helpers
	case req.HostHas == nil:
		return spec, nil, l, err
	case req.HostHas(ctx, p.Name):
		// Not here: the agent host that takes the run finds it (and its
		// helpers) on its own PATH at the run's start (the worker's
		// LocateProfile).
		spec.Binary, spec.Launcher, l = p.Binary, "", Located{}
	default:
		return spec, nil, l, catalog.AgentMissing.New("%s (the %s profile's CLI) is on neither this server's PATH nor any agent host's", p.Binary, p.Name).
			WithFix("install it on an agent host (%s, tested with %s): its runs go to the hosts that have it", p.Install, cmp.Or(p.Tested, "no version yet"))
	}
	if spec.Model == "" && p.ModelEnv != "" {
		spec.Model = strings.TrimSpace(req.Getenv(p.ModelEnv))
	}
	if spec.Model == "" {
		spec.Model = p.DefaultModel
	}
	if p.Sessions && p.SessionIDs {
		spec.Session = agent.NewSessionID()
	}
	def, err := profileRoute(req, p)
	if err != nil {
		return spec, nil, Located{}, err
	}
	rs, err := planRoute(ctx, req, p.Protocol, p.Name+" profile", def)
	if err != nil {
		return spec, nil, Located{}, err
	}
	gw := &run.GatewaySpec{Routes: []run.RouteSpec{rs}}
	spec.Command = p.Binary + " (" + p.Name + " profile)"
	if req.OnHosts {
		// An agent host finds the helpers on its own PATH, and warns
		// of what it does not have.
		l.Missing = nil
	}
	return spec, gw, l, nil
}

// profileRoute is the route profile p takes without --model-server (nil:
// its family's public API, which config.toml may change): the CLI's own
// endpoint (CLIEndpoint), else the profile's own provider.
func profileRoute(req Request, p agent.Info) (*run.RouteSpec, error) {
	if req.Models.Server == "" {
		rs, ok, err := CLIEndpoint(p, req.Getenv, req.Models.Providers)
		if err != nil {
			return nil, err
		}
		if ok {
			return &rs, nil
		}
	}
	if p.Upstream == "" {
		return nil, nil
	}
	def := &run.RouteSpec{Name: p.Protocol, URL: p.Upstream}
	for _, k := range p.KeyEnv {
		def.Keys = append(def.Keys, run.KeySource{Env: k, Header: gateway.KeyHeader(p.Protocol)})
	}
	return def, nil
}

// CLIEndpoint is the route to the endpoint that profile p's CLI is set
// up for in the environment, through its own base-URL variable: where
// the CLI would go bare, with its key. ok is false when the variable is
// not set, names the family's public API (whose route keeps all of its
// key sources), or config.toml's [providers.NAME] url names the endpoint
// instead. A URL the gateway cannot forward as the CLI would is a
// catalog.BadCLIEndpoint error.
func CLIEndpoint(p agent.Info, getenv func(string) string, providers map[string]config.Provider) (rs run.RouteSpec, ok bool, err error) {
	v := ""
	if p.BaseURLEnv != "" {
		v = strings.TrimSpace(getenv(p.BaseURLEnv))
	}
	if pr, set := providers[p.Protocol]; v == "" || (set && pr.URL != "" && p.Upstream == "") {
		return rs, false, nil
	}
	u, base, err := gateway.ServerURL(v, p.Protocol)
	if err != nil {
		return rs, false, catalog.BadCLIEndpoint.New("%s=%s (where your %s CLI is set up to go): %v", p.BaseURLEnv, gateway.RedactRaw(v), p.Name, err).
			WithFix("unset %s to use the %s profile's provider, or set it to the http:// or https:// URL of an endpoint", p.BaseURLEnv, p.Name)
	}
	if pub, _ := gateway.Public(p.Protocol); u == pub.URL && p.Upstream == "" {
		return rs, false, nil
	}
	return run.RouteSpec{Name: p.Protocol, URL: u, Base: base, Keys: slices.Clone(p.BaseURLKeys)}, true, nil
}

// planRoute is the gateway route of family name: the user's model server
// when one is named, else the provider's public API (config.toml may
// change its URL and key source). The key must be available now.
func planRoute(ctx context.Context, req Request, name, who string, def *run.RouteSpec) (run.RouteSpec, error) {
	m := req.Models
	if m.Server != "" {
		rs, err := serverRoute(m, name)
		if err != nil {
			return rs, err
		}
		if err := reachable(ctx, req, rs.URL); err != nil {
			return rs, catalog.ModelUnreachable.Wrap(err, "%s: %v", rs.URL, err)
		}
		if ok, tried := gateway.Available(rs, req.Getenv); !ok {
			return rs, catalog.NoKey.New("model server %s: its key comes from %s, which gives none", rs.Server, strings.Join(tried, ", "))
		}
		return rs, nil
	}
	rs, _ := gateway.Public(name)
	if def != nil {
		rs = *def
	}
	if pr, ok := m.Providers[name]; ok && def == nil {
		if pr.URL != "" {
			u, base, err := gateway.ServerURL(pr.URL, name)
			if err != nil {
				return rs, catalog.BadConfig.New("providers.%s.url: %v", name, err)
			}
			rs.URL, rs.Base = u, base
		}
		if k := KeySource(pr.KeySource, name); k != nil {
			rs.Keys = append([]run.KeySource{*k}, rs.Keys...)
		}
	}
	if ok, tried := gateway.Available(rs, req.Getenv); !ok {
		return rs, catalog.NoKey.New("the %s reaches %s through the model gateway, and none of %s is set", who, rs.URL, strings.Join(tried, ", "))
	}
	return rs, nil
}

// serverRoute is route family name to the user's model server.
func serverRoute(m ModelRequest, name string) (run.RouteSpec, error) {
	rs := run.RouteSpec{Name: name}
	entry, named := m.Servers[m.Server]
	server := m.Server
	if !named {
		u, base, err := gateway.ServerURL(m.Server, name)
		if err != nil {
			var have []string
			for n := range m.Servers {
				have = append(have, n)
			}
			slices.Sort(have)
			msg := fmt.Sprintf("%v", err)
			if len(have) > 0 {
				msg += "; config.toml names " + strings.Join(have, ", ")
			}
			return rs, catalog.BadModelServer.New("%s", msg)
		}
		rs.URL, rs.Base, server = u, base, u
		// A URL that a config entry names takes that entry's settings.
		for n, e := range m.Servers {
			if eu, _, err := gateway.ServerURL(e.URL, name); err == nil && eu == u {
				entry, named, server = e, true, n
				break
			}
		}
	}
	if named {
		u, base, err := gateway.ServerURL(entry.URL, name)
		if err != nil {
			return rs, catalog.BadConfig.New("model_servers.%s.url: %v", server, err)
		}
		rs.URL, rs.Base, rs.MaxConcurrent = u, base, entry.MaxConcurrent
		if k := KeySource(entry.KeySource, name); k != nil {
			rs.Keys = []run.KeySource{*k}
		}
	}
	rs.Server = server
	return rs, nil
}

// KeySource is where config.toml says a route's key comes from, as the
// run records it (nil when it names none).
func KeySource(k config.KeySource, route string) *run.KeySource {
	h := gateway.KeyHeader(route)
	switch {
	case k.APIKeyEnv != "":
		return &run.KeySource{Env: k.APIKeyEnv, Header: h}
	case k.APIKeyFile != "":
		return &run.KeySource{File: k.APIKeyFile, Header: h}
	case k.APIKeyCommand != "":
		return &run.KeySource{Command: k.APIKeyCommand, Header: h}
	}
	return nil
}

// reachable dials a model server once, or the proxy the host reaches it
// through (hn): a server that refuses the connection is caught at
// submit, not as a failed attempt.
func reachable(ctx context.Context, req Request, raw string) error {
	if req.OnHosts {
		return nil // from the agent host's network, by the run's first request
	}
	addr, err := gateway.ProxiesOf(req.Getenv).Dialled(raw)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// Located is where a profile's CLI and its helpers were found.
type Located struct {
	// Binary is the program to run; where the CLI on PATH is an npm
	// launcher of a native program, that program, and Launcher the
	// launcher.
	Binary, Launcher string
	// Helpers are the host paths of the profile's helpers that lie
	// outside the system directories (run.AgentSpec.Helpers).
	Helpers []string
	// Visible are the host paths the sandbox must show read-only: the
	// CLI's package (or the binary), its interpreter, the helpers.
	Visible []string
	// Missing are the helpers the sandbox will not have.
	Missing []MissingHelper
}

// MissingHelper is a helper the sandbox will not have, and why.
type MissingHelper struct {
	agent.Helper
	// Why says where it was looked for ("rg (ripgrep, ...) is not on
	// PATH").
	Why string
}

// Warning is m as one warning of submit's: what fails, and the fix.
func (m MissingHelper) Warning() string {
	return m.Why + ": those tools fail in the sandbox; " + m.Install
}

// Warnings are l's missing helpers' warnings.
func (l Located) Warnings() []string {
	var out []string
	for _, m := range l.Missing {
		out = append(out, m.Warning())
	}
	return out
}

// LocateProfile finds profile p's CLI on the PATH of getenv: the program
// to run (where p's launcher runs a native program, that program, and
// the launcher), the helpers it runs (agent.Info.Helpers), and the host
// paths it needs visible read-only. A team's agent host calls it at a
// run's start, for its own environment.
func LocateProfile(p agent.Info, getenv func(string) string) (Located, error) {
	bin, visible, err := findCLI(p, getenv("PATH"))
	if err != nil {
		return Located{}, err
	}
	l := Located{Binary: bin, Visible: visible}
	if prog, _, ok := p.Native.Resolve(bin, runtime.GOOS, runtime.GOARCH); ok {
		// The program the launcher would run, in its package (visible).
		l.Binary, l.Launcher = prog, bin
	}
	for _, h := range p.Helpers {
		found, why := findHelper(h, getenv)
		if found != "" && strings.ContainsRune(filepath.Dir(found), filepath.ListSeparator) {
			found, why = "", fmt.Sprintf("%s (%s) is at %s, in a directory PATH cannot name (it holds a %q)", h.Name, h.What, found, filepath.ListSeparator)
		}
		switch {
		case why != "":
			l.Missing = append(l.Missing, MissingHelper{Helper: h, Why: why})
		case found != "" && !slices.Contains(l.Helpers, found):
			l.Helpers = append(l.Helpers, found)
			l.Visible = append(l.Visible, found)
		}
	}
	return l, nil
}

// findHelper finds helper h: on the PATH of getenv, else in the CLI's own
// data directory (h.DataDir under $XDG_DATA_HOME or ~/.local/share). It
// returns the program's real path, "" for one in the system directories
// (every sandbox shows those), or why the sandbox will not have it.
func findHelper(h agent.Helper, getenv func(string) string) (found, why string) {
	name := h.Name + " (" + h.What + ")"
	if p, err := LookPath(h.Name, getenv("PATH")); err == nil {
		real, err := filepath.EvalSymlinks(p)
		switch {
		case err != nil:
			return "", fmt.Sprintf("%s on PATH, %s, cannot be read: %v", name, p, err)
		case underSystem(real):
			return "", ""
		case filepath.Base(real) != h.Name:
			// Its directory first on PATH would not make it h.Name.
			return "", fmt.Sprintf("%s on PATH, %s, is a link to a program of another name, %s, which the sandbox cannot put on PATH as %s (put a copy named %s on PATH)", name, p, real, h.Name, h.Name)
		}
		return real, ""
	}
	dir := helperDataDir(h, getenv)
	if dir == "" {
		return "", name + " is not on PATH"
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(dir, h.Name)); err == nil && filepath.Base(real) == h.Name && executable(real) {
		return real, ""
	}
	return "", fmt.Sprintf("%s is neither on PATH nor in %s", name, dir)
}

// helperDataDir is where h's CLI keeps its own copy of h: h.DataDir under
// $XDG_DATA_HOME, else ~/.local/share ("": none).
func helperDataDir(h agent.Helper, getenv func(string) string) string {
	if h.DataDir == "" {
		return ""
	}
	data := getenv("XDG_DATA_HOME")
	if !filepath.IsAbs(data) {
		home := getenv("HOME")
		if !filepath.IsAbs(home) {
			return ""
		}
		data = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(data, filepath.FromSlash(h.DataDir))
}

// Installed names the profiles of c whose CLI is on path: what a team's
// agent host (or the server's own worker) can run.
func Installed(c agent.Catalog, path string) []string {
	out := []string{}
	for _, p := range c {
		if _, err := LookPath(p.Binary, path); err == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// findCLI looks p's binary up on path and returns the path to run (links
// resolved: a CLI run through a link to its package would not find the
// package's files inside the sandbox) and the host paths to make visible
// read-only: the CLI's package directory (or the binary alone) and the
// interpreter its #! line names, where they lie outside the system
// directories every sandbox has.
func findCLI(p agent.Info, path string) (string, []string, error) {
	found, err := LookPath(p.Binary, path)
	if err != nil {
		return "", nil, catalog.AgentMissing.New("%s (the %s profile's CLI) is not on your PATH", p.Binary, p.Name).
			WithFix("install it: %s (tested with %s), or put its directory on PATH", p.Install, cmp.Or(p.Tested, "no version yet"))
	}
	real, err := filepath.EvalSymlinks(found)
	if err != nil {
		return "", nil, catalog.AgentMissing.Wrap(err, "%s: %v", found, err)
	}
	var visible []string
	add := func(p string) {
		if !underSystem(p) && !slices.Contains(visible, p) {
			visible = append(visible, p)
		}
	}
	if root := agent.PackageRoot(real); root != "" {
		add(root)
	} else {
		add(real)
	}
	if interp := interpreter(real, path); interp != "" {
		add(interp)
	}
	return real, visible, nil
}

// interpreter is the real path of the program a script's #! line runs
// (through /usr/bin/env, looked up on path), or "".
func interpreter(file, path string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return ""
	}
	prog := fields[0]
	if filepath.Base(prog) == "env" {
		args := fields[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "-") {
			args = args[1:]
		}
		if len(args) == 0 {
			return ""
		}
		lp, err := LookPath(args[0], path)
		if err != nil {
			return ""
		}
		prog = lp
	}
	real, err := filepath.EvalSymlinks(prog)
	if err != nil {
		return ""
	}
	return real
}

// LookPath finds an executable name in the directories of path (the
// submitting user's PATH, not this process's).
func LookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if c := filepath.Join(dir, name); executable(c) {
			return c, nil
		}
	}
	return "", exec.ErrNotFound
}

// executable reports whether p is a regular file (through links) that
// someone may execute.
func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// HandoffNames are the variables a run's supervisor needs the values of:
// those the agent gets (--env), those its gateway reads keys from, and
// those its gateway and egress proxy reach the network by
// (gateway.NetEnv).
func HandoffNames(r *run.Run) []string {
	names := append(slices.Clone(r.Agent.Env), gateway.NetEnv...)
	if r.Gateway != nil {
		for _, rs := range r.Gateway.Routes {
			for _, k := range rs.Keys {
				if k.Env != "" {
					names = append(names, k.Env)
				}
			}
		}
	}
	if r.Agent.Name == agent.BuiltinName {
		names = append(names, "AGENTRUN_CONTEXT_WINDOW")
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// HandoffValues are the values getenv gives of r's HandoffNames (those it
// has; none with a nil getenv).
func HandoffValues(r *run.Run, getenv func(string) string) map[string]string {
	m := map[string]string{}
	if getenv == nil {
		return m
	}
	for _, n := range HandoffNames(r) {
		if v := getenv(n); v != "" {
			m[n] = v
		}
	}
	return m
}

// shellWords are sh's builtins and keywords: a command line starting with
// one is not looked up on PATH.
var shellWords = map[string]bool{
	"!": true, ".": true, ":": true, "[": true, "{": true, "alias": true, "bg": true, "break": true, "case": true, "cd": true,
	"command": true, "continue": true, "echo": true, "eval": true, "exec": true, "exit": true, "export": true, "false": true,
	"fg": true, "for": true, "getopts": true, "hash": true, "if": true, "jobs": true, "kill": true, "local": true, "printf": true,
	"pwd": true, "read": true, "readonly": true, "return": true, "set": true, "shift": true, "test": true, "times": true,
	"trap": true, "true": true, "type": true, "ulimit": true, "umask": true, "unalias": true, "unset": true, "until": true,
	"wait": true, "while": true,
}

// CommandPreflight checks, for an --agent-cmd whose first word is a plain
// program name, that the program is on the submitting PATH (a run would
// otherwise spend its attempts on "command not found"), and returns what
// must be made visible read-only for it to run in the sandbox: the program
// (its package directory) and its interpreter, outside the system
// directories. A command line that starts with anything else (a shell
// construct, a variable, a relative path) is left to the shell.
func CommandPreflight(cmd, path string) ([]string, error) {
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		return nil, nil
	}
	first := fields[0]
	if shellWords[first] || strings.ContainsAny(first, "$`;|&<>(){}=*?[]'\"\\~#") {
		return nil, nil
	}
	if strings.Contains(first, "/") && !filepath.IsAbs(first) {
		return nil, nil // relative to the workspace
	}
	p := agent.Info{Name: f("agent_cmd"), Binary: first, Install: "install " + first + " or fix the command"}
	if filepath.IsAbs(first) {
		if fi, err := os.Stat(first); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return nil, catalog.AgentMissing.New("the agent command's program %s is not an executable file", first).
				WithFix("fix the path in %s, or install the program", f("agent_cmd"))
		}
		p.Binary = filepath.Base(first)
		path = filepath.Dir(first)
	}
	_, visible, err := findCLI(p, path)
	if err != nil {
		return nil, catalog.AgentMissing.New("the agent command's program %q is not on your PATH", first).
			WithFix("install it or put its directory on PATH; to run a shell construct, start the command with it (e.g. 'sh -c ...')")
	}
	return visible, nil
}
