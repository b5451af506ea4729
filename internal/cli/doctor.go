package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/gateway"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sandbox"
	"github.com/agentrun/agentrun/internal/submit"
)

// doctorCheck is one finding of `agentrun doctor`.
type doctorCheck struct {
	// Name is the thing checked: data_directory, config, git,
	// sandbox.NAME, key.ROUTE, model_server.NAME, agent.PROFILE,
	// endpoint.PROFILE (a CLI set up for an endpoint of its own).
	Name string `json:"name"`
	// Status is ok, warn (works, with a caveat, or optional and missing)
	// or fail (what it names cannot work).
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
	// Path and Version of what was found (git, agent CLIs).
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	// Enforced is what a sandbox of this backend enforces here (started
	// for real, then destroyed).
	Enforced map[string]string `json:"enforced,omitempty"`
}

type doctorOutput struct {
	OK     bool          `json:"ok"` // no check failed
	Checks []doctorCheck `json:"checks"`
}

func (app *App) newDoctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check what agentrun needs on this machine, and what each sandbox would enforce",
		Long: `Check this machine: the data directory, the configuration, git, each sandbox
backend (a real sandbox is started and destroyed, and what it enforces is
listed: namespaces, Landlock, seccomp, cgroups, user namespaces), where each
provider's key would come from, whether workspaces will be copy-on-write
overlays (one is mounted for real) and what the overlays' layer cache holds
against its budget, the model servers named in config.toml
(reachable, the models they list), and the agent CLIs on your PATH with their
versions against the versions agentrun was tested with. Every problem comes
with its fix. Nothing is changed (the data directory is created if missing).

--json prints {"ok", "checks": [{"name", "status", "detail", "fix", "path",
"version", "enforced"}]}; status is ok, warn or fail. Exit status 1 when a
check failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return app.runDoctor(cmd.Context()) },
	}
}

func (app *App) runDoctor(ctx context.Context) error {
	var out doctorOutput
	add := func(c doctorCheck) { out.Checks = append(out.Checks, c) }

	home := DataHome(app.Getenv)
	add(checkDataHome(home))
	settings, cfgErr := config.Load(app.Getenv)
	if cfgErr != nil {
		ce, _ := catalog.As(cfgErr)
		c := doctorCheck{Name: "config", Status: "fail", Detail: cfgErr.Error()}
		if ce != nil {
			c.Fix = ce.Fix
		}
		add(c)
	} else {
		detail := settings.Path + " (not present: defaults apply)"
		if _, err := os.Stat(settings.Path); err == nil {
			detail = settings.Path
		}
		add(doctorCheck{Name: "config", Status: "ok", Detail: detail})
	}
	if p, err := exec.LookPath("git"); err != nil {
		add(doctorCheck{Name: "git", Status: "fail", Detail: "git is not on PATH", Fix: catalog.GitMissing.Fix})
	} else {
		v, _ := exec.CommandContext(ctx, p, "--version").Output()
		add(doctorCheck{Name: "git", Status: "ok", Path: p, Version: strings.TrimSpace(strings.TrimPrefix(string(v), "git version ")), Detail: "found"})
	}

	// The slow checks (sandboxes, model servers, CLI versions) run side by side.
	var mu sync.Mutex
	var wg sync.WaitGroup
	var late []doctorCheck
	push := func(c doctorCheck) { mu.Lock(); late = append(late, c); mu.Unlock() }
	var defaultBackend sandbox.Backend
	for _, b := range app.Deps.Backends(app.Executable) {
		name := b.Name()
		if name == settings.Sandbox || (settings.Sandbox == "" && name == app.Deps.DefaultBackend) {
			defaultBackend = b
		}
		wg.Go(func() {
			push(checkBackend(ctx, b, name == settings.Sandbox || (settings.Sandbox == "" && name == app.Deps.DefaultBackend), settings.Image, settings.File.Images))
		})
	}
	if filepath.IsAbs(home) {
		wg.Go(func() { push(checkWorkspace(ctx, defaultBackend, home)) })
		push(checkLayerCache(home, settings.CacheBudget))
	}
	// Profiles whose CLI is set up for an endpoint of its own go there,
	// not to their family's public API.
	own := map[string]bool{}
	for _, p := range app.Deps.Agents {
		if c, ok := checkEndpoint(p, app.Getenv, settings.File.Providers); ok {
			own[p.Name] = true
			push(c)
		}
	}
	for _, name := range gateway.RouteNames {
		rs, _ := gateway.Public(name)
		if pr, ok := settings.File.Providers[name]; ok {
			if k := submit.KeySource(pr.KeySource, name); k != nil {
				rs.Keys = append([]run.KeySource{*k}, rs.Keys...)
			}
		}
		push(checkKey(app.Deps.Agents, own, rs, app.Getenv))
	}
	wg.Go(func() {
		if c, ok := checkProxy(ctx, app.Getenv); ok {
			push(c)
		}
	})
	for _, name := range slices.Sorted(maps.Keys(settings.File.ModelServers)) {
		m := settings.File.ModelServers[name]
		wg.Go(func() { push(checkModelServer(ctx, name, m, app.Getenv)) })
	}
	for _, p := range app.Deps.Agents {
		wg.Go(func() { push(checkAgentCLI(ctx, p, app.Getenv, defaultBackend)) })
	}
	wg.Wait()
	slices.SortFunc(late, func(a, b doctorCheck) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range late {
		add(c)
	}
	out.OK = true
	for _, c := range out.Checks {
		out.OK = out.OK && c.Status != "fail"
	}
	if app.JSON {
		if err := writeJSON(app.Stdout, out); err != nil {
			return err
		}
	} else if err := app.printDoctor(out); err != nil {
		return err
	}
	if !out.OK {
		return &reported{exit: catalog.ExitRunFailed}
	}
	return nil
}

func (app *App) printDoctor(out doctorOutput) error {
	col := app.colour()
	t := table{header: []string{"", "CHECK", "DETAIL"}, colour: col}
	for _, c := range out.Checks {
		mark := paint(col, sgrGreen, "ok")
		switch c.Status {
		case "warn":
			mark = paint(col, sgrYellow, "warn")
		case "fail":
			mark = paint(col, sgrRed, "FAIL")
		}
		detail := c.Detail
		if c.Version != "" {
			detail += " (" + c.Version + ")"
		}
		if c.Path != "" {
			detail += ": " + app.tildePath(c.Path)
		}
		// Wrapped, never cut: the fix is what to do next, and the
		// enforced list names what the sandbox does not do.
		rows := wrapWords(oneLine(detail, 0), doctorWidth)
		if len(c.Enforced) > 0 {
			rows = append(rows, wrapWords(enforcedLine(c.Enforced), doctorWidth)...)
		}
		if c.Fix != "" && c.Status != "ok" {
			rows = append(rows, wrapWords("fix: "+oneLine(c.Fix, 0), doctorWidth)...)
		}
		for i, row := range rows {
			if i == 0 {
				t.add(mark, c.Name, row)
			} else {
				t.add("", "", row)
			}
		}
	}
	if err := t.write(app.Stdout); err != nil {
		return err
	}
	if out.OK {
		_, err := fmt.Fprintln(app.Stdout, "\nno problems found")
		return err
	}
	_, err := fmt.Fprintln(app.Stdout, "\nsome checks failed: follow each fix")
	return err
}

// doctorWidth is where doctor's DETAIL column wraps: with its first two
// columns, a line of about 120 characters.
const doctorWidth = 100

// wrapWords breaks s into lines of at most width runes at spaces; a word
// longer than width (a path, a URL) has a line of its own, whole. Every
// word of s is kept.
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	return append(lines, line)
}

// enforcedLine names what is enforced and what is not.
func enforcedLine(m map[string]string) string {
	var on, off []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] == "enforced" || strings.HasPrefix(m[k], "enforced") {
			on = append(on, k)
		} else {
			off = append(off, k)
		}
	}
	s := "enforces " + strings.Join(on, ", ")
	if len(off) > 0 {
		s += "; not: " + strings.Join(off, ", ")
	}
	return s
}

func checkDataHome(home string) doctorCheck {
	c := doctorCheck{Name: "data_directory", Path: home}
	if !filepath.IsAbs(home) {
		c.Status, c.Detail = "fail", "AGENTRUN_HOME is a relative path: runs would land under whatever directory a command is run in"
		c.Fix = "set AGENTRUN_HOME to an absolute path, or unset it (default ~/.local/share/agentrun)"
		return c
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		c.Status, c.Detail, c.Fix = "fail", err.Error(), catalog.Home.Fix
		return c
	}
	f, err := os.CreateTemp(home, ".doctor-*")
	if err != nil {
		c.Status, c.Detail, c.Fix = "fail", "not writable: "+err.Error(), catalog.Home.Fix
		return c
	}
	f.Close()
	os.Remove(f.Name())
	c.Status, c.Detail = "ok", "writable"
	if free, ok := freeBytes(home); ok {
		c.Detail += fmt.Sprintf(", %s free", humanBytes(int64(free)))
		if free < 1<<30 {
			c.Status, c.Fix = "warn", "free disk space: 'agentrun gc' removes finished runs' workspaces and unused cached layers, 'agentrun clean --finished' the runs themselves"
		}
	}
	return c
}

// checkBackend preflights b and starts a sandbox with it; a backend that
// runs images starts the configured one (without one, it says so).
func checkBackend(ctx context.Context, b sandbox.Backend, isDefault bool, image string, pins map[string]string) doctorCheck {
	c := doctorCheck{Name: "sandbox." + b.Name()}
	role := ""
	if isDefault {
		role = " (the default)"
	}
	status := "fail"
	if !isDefault {
		status = "warn" // another backend may do
	}
	if err := b.Preflight(ctx); err != nil {
		c.Status, c.Detail = status, "cannot run here"+role+": "+err.Error()
		if ce, ok := catalog.As(err); ok {
			c.Detail, c.Fix = "cannot run here"+role+": "+ce.Cause, ce.Fix
		}
		return c
	}
	spec := sandbox.Spec{RunID: "doctor", Network: sandbox.NetworkNone}
	if ir, ok := b.(sandbox.ImageResolver); ok {
		if image == "" {
			c.Status, c.Detail, c.Fix = "warn", "the engine answers"+role+"; no image is configured to start a sandbox from", "set image in the config file (REF@sha256:DIGEST), or pass --image to submit"
			return c
		}
		img, err := ir.ResolveImage(ctx, image, pins)
		if err != nil {
			c.Status, c.Detail = status, "cannot run here"+role+": "+err.Error()
			if ce, ok := catalog.As(err); ok {
				c.Detail, c.Fix = "cannot run here"+role+": "+ce.Cause, ce.Fix
			}
			return c
		}
		spec.Image = img.ID
	}
	tmp, err := os.MkdirTemp("", "agentrun-doctor-")
	if err != nil {
		c.Status, c.Detail = status, err.Error()
		return c
	}
	defer os.RemoveAll(tmp)
	spec.Workspace, spec.StateDir = filepath.Join(tmp, "ws"), filepath.Join(tmp, "state")
	if err := os.Mkdir(spec.Workspace, 0o700); err != nil {
		c.Status, c.Detail = status, err.Error()
		return c
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sb, err := b.Start(sctx, spec)
	if err != nil {
		c.Status, c.Detail = status, "a sandbox did not start"+role+": "+err.Error()
		return c
	}
	c.Enforced = sb.Enforced()
	_ = sb.Destroy(context.WithoutCancel(ctx))
	c.Status, c.Detail = "ok", "can run here"+role
	if b.Isolation().None() {
		c.Status, c.Detail = "warn", "can run here, but does not isolate: used only when named (--sandbox "+b.Name()+")"
	}
	return c
}

// checkProxy says how the model gateway and the egress proxy reach the
// network when the environment names a proxy or certificate authorities
// (gateway.NetEnv), and whether the proxy takes a connection: ok false
// when it names neither.
func checkProxy(ctx context.Context, getenv func(string) string) (doctorCheck, bool) {
	hn := gateway.NewHostNet(getenv)
	if len(hn.Proxies)+len(hn.CAs)+len(hn.Warnings) == 0 {
		return doctorCheck{}, false
	}
	c := doctorCheck{Name: "proxy", Status: "ok"}
	var parts []string
	if len(hn.Proxies) > 0 {
		p := "model servers and the hosts --allow admits are reached through " + strings.Join(hn.Proxies, " and ")
		if hn.NoProxy != "" {
			p += ", except " + hn.NoProxy + " and this machine"
		} else {
			p += ", except this machine"
		}
		parts = append(parts, p)
		for _, scheme := range []string{"https", "http"} {
			addr := hn.ProxyAddr(scheme)
			if addr == "" {
				continue
			}
			dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
			cancel()
			if err != nil {
				c.Status, c.Fix = "warn", "start the proxy, or set the variable to one that listens"
				parts = append(parts, fmt.Sprintf("the %s:// proxy at %s takes no connection: %v", scheme, addr, err))
				break
			}
			conn.Close()
		}
	}
	if len(hn.CAs) > 0 {
		parts = append(parts, "trusting the certificate authorities of "+strings.Join(hn.CAs, ", ")+" besides the system's")
	}
	if len(hn.Warnings) > 0 {
		c.Status = "warn"
		parts = append(parts, "no certificate added from "+strings.Join(hn.Warnings, "; "))
		fix := "point the certificate variable at a readable PEM file (or a directory of them, for SSL_CERT_DIR), or unset it"
		if c.Fix != "" {
			fix = c.Fix + "; " + fix
		}
		c.Fix = fix
	}
	c.Detail = strings.Join(parts, "; ")
	return c, true
}

// checkEndpoint is the check of profile p's CLI's own endpoint (ok false
// when its environment names none: see submit.CLIEndpoint).
func checkEndpoint(p agent.Info, getenv func(string) string, providers map[string]config.Provider) (doctorCheck, bool) {
	c := doctorCheck{Name: "endpoint." + p.Name}
	rs, ok, err := submit.CLIEndpoint(p, getenv, providers)
	if err != nil {
		// A warning: the variable may be set for another tool, and only
		// --agent NAME is refused.
		ce, _ := catalog.As(err)
		c.Status, c.Detail = "warn", err.Error()
		if ce != nil {
			c.Detail, c.Fix = "--agent "+p.Name+" is refused: "+ce.Cause, ce.Fix
		}
		return c, true
	}
	if !ok {
		return c, false
	}
	k, found := keyFrom(rs.Keys, getenv)
	if !found {
		c.Status = "warn"
		c.Detail = fmt.Sprintf("%s: the %s profile goes to %s (as the CLI does), and none of %s is set", p.BaseURLEnv, p.Name, rs.URL, describeKeys(rs.Keys))
		c.Fix = fmt.Sprintf("export the key for that endpoint in %s, or unset %s for the provider's public API", rs.Keys[0].Env, p.BaseURLEnv)
		return c, true
	}
	c.Status, c.Detail = "ok", fmt.Sprintf("%s: the %s profile goes to %s (as the CLI does), key from %s (kept on the host)", p.BaseURLEnv, p.Name, rs.URL, k.Describe())
	return c, true
}

// keyFrom is the first of keys that gives a key now (found false: none).
func keyFrom(keys []run.KeySource, getenv func(string) string) (k run.KeySource, found bool) {
	for _, k := range keys {
		if ok, _ := gateway.Available(run.RouteSpec{Keys: []run.KeySource{k}}, getenv); ok {
			return k, true
		}
	}
	return k, false
}

// describeKeys names where keys are read from, for a message.
func describeKeys(keys []run.KeySource) string {
	var names []string
	for _, k := range keys {
		names = append(names, k.Describe())
	}
	return strings.Join(names, ", ")
}

func checkKey(agents agent.Catalog, own map[string]bool, rs run.RouteSpec, getenv func(string) string) doctorCheck {
	c := doctorCheck{Name: "key." + rs.Name}
	var users []string
	for _, p := range agents {
		if p.Protocol == rs.Name && p.Upstream == "" && !own[p.Name] {
			users = append(users, p.Name)
		}
	}
	if len(users) == 0 {
		c.Status, c.Detail = "ok", fmt.Sprintf("%s: no profile goes there here (each CLI is set up for an endpoint of its own); the built-in agent would", rs.URL)
		return c
	}
	who := strings.Join(users, ", ")
	if k, found := keyFrom(rs.Keys, getenv); found {
		c.Status, c.Detail = "ok", fmt.Sprintf("%s: from %s (kept on the host; agents get a placeholder)", rs.URL, k.Describe())
		return c
	}
	c.Status = "warn"
	need := "profile needs"
	if len(users) > 1 {
		need = "profiles need"
	}
	c.Detail = fmt.Sprintf("no key for %s (none of %s is set): the %s %s one, or --model-server", rs.URL, describeKeys(rs.Keys), who, need)
	c.Fix = catalog.NoKey.Fix
	return c
}

func checkModelServer(ctx context.Context, name string, m config.ModelServer, getenv func(string) string) doctorCheck {
	c := doctorCheck{Name: "model_server." + name}
	u, base, err := gateway.ServerURL(m.URL, gateway.RouteOpenAI)
	if err != nil {
		c.Status, c.Detail, c.Fix = "fail", err.Error(), catalog.BadModelServer.Fix
		return c
	}
	c.Path = u
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gateway.URLFor(run.RouteSpec{URL: u, Base: base}, "/v1/models"), nil)
	if k := submit.KeySource(m.KeySource, "openai"); k != nil {
		cred, ok, _ := gateway.ResolveKey(ctx, run.RouteSpec{Keys: []run.KeySource{*k}}, getenv)
		if !ok {
			c.Status, c.Detail, c.Fix = "fail", "its key comes from "+k.Describe()+", which gives none", catalog.NoKey.Fix
			return c
		}
		req.Header.Set("Authorization", "Bearer "+cred.Value)
	}
	cl := &http.Client{Timeout: 5 * time.Second, Transport: gateway.NewHostNet(getenv).Transport()}
	resp, err := cl.Do(req)
	if err != nil {
		c.Status, c.Detail, c.Fix = "fail", "unreachable: "+err.Error(), catalog.ModelUnreachable.Fix
		return c
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &list)
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		c.Status, c.Detail, c.Fix = "fail", "refused the key: "+resp.Status, catalog.ModelAuth.Fix
	case resp.StatusCode >= 300:
		c.Status, c.Detail = "warn", "reachable, but listing its models answered "+resp.Status
	case len(ids) == 0:
		c.Status, c.Detail = "warn", "reachable, but it lists no model (load one)"
	default:
		c.Status, c.Detail = "ok", "reachable; models: "+oneLine(strings.Join(ids, ", "), 80)
	}
	if m.MaxConcurrent > 0 {
		c.Detail += fmt.Sprintf("; %d requests at once across runs", m.MaxConcurrent)
	}
	return c
}

// checkAgentCLI checks profile p's CLI on the PATH of getenv: found, its
// version, the helpers it runs, and that b (the default sandbox backend,
// nil: none) can show it.
func checkAgentCLI(ctx context.Context, p agent.Info, getenv func(string) string, b sandbox.Backend) doctorCheck {
	c := doctorCheck{Name: "agent." + p.Name}
	path := getenv("PATH")
	bin, err := submit.LookPath(p.Binary, path)
	if err != nil {
		c.Status, c.Detail, c.Fix = "warn", p.Binary+" is not on PATH", "to use --agent "+p.Name+": "+p.Install
		return c
	}
	c.Path = bin
	vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(vctx, bin, "--version")
	cmd.Env = []string{"PATH=" + path, "HOME=" + os.TempDir(), "NO_COLOR=1", "TERM=dumb",
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "GEMINI_CLI_NO_RELAUNCH=true"}
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	v := firstVersion(string(out))
	c.Version = v
	switch {
	case err != nil && v == "":
		c.Status, c.Detail = "warn", "found, but '--version' failed: "+err.Error()
	case p.Tested == "":
		c.Status, c.Detail = "warn", "found; this profile is not tested yet"
	case v == "":
		// (a development build, or a --version of another form)
		c.Status, c.Detail = "warn", "found, but '--version' names no version; agentrun was tested with "+p.Tested
	case v != p.Tested:
		c.Status, c.Detail = "warn", "found; agentrun was tested with "+p.TestedWith()
		if p.TestedFrom != "" {
			c.Fix = "if it misbehaves: try " + p.TestedWith()
		} else {
			c.Fix = "if it misbehaves: npm install -g " + strings.TrimPrefix(p.Install, "npm install -g ") + "@" + p.Tested
		}
	default:
		c.Status, c.Detail = "ok", "found, the version agentrun was tested with"
	}
	// Where a run finds it, as submit does: the program it starts (with
	// its launcher, if the CLI on PATH is an npm launcher of a native
	// program) and what the sandbox must show.
	l, err := submit.LocateProfile(p, getenv)
	if err != nil {
		return c
	}
	if l.Launcher != "" {
		c.Detail += "; runs start the native program its npm launcher runs, " + l.Binary
	}
	for _, h := range l.Helpers {
		c.Detail += "; runs find " + filepath.Base(h) + " at " + h
	}
	for _, m := range l.Missing {
		// What submit warns of.
		c.Status, c.Detail = "warn", c.Detail+"; but "+m.Why+": those tools fail in the sandbox"
		c.Fix = strings.TrimPrefix(c.Fix+"; "+m.Install, "; ")
	}
	if why := hiddenCLI(l.Visible, b); why != "" {
		// What submit refuses (agent_not_visible).
		c.Status, c.Detail, c.Fix = "warn", "found, but "+why, catalog.AgentHidden.Fix
	}
	return c
}

// hiddenCLI says why backend b cannot show a profile's CLI, whose run
// needs the host paths visible (the CLI, its package, its interpreter),
// at their own paths; "" when it can, or b does not say.
func hiddenCLI(visible []string, b sandbox.Backend) string {
	rc, ok := b.(sandbox.ReadOnlyChecker)
	if !ok {
		return ""
	}
	for _, v := range visible {
		if err := rc.CheckReadOnly(v); err != nil {
			return fmt.Sprintf("the %s sandbox cannot show it: %v", b.Name(), err) // (err names v)
		}
	}
	return ""
}

// firstVersion is the first x.y.z in s.
func firstVersion(s string) string {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\n' || r == '(' || r == ')' || r == 'v' }) {
		parts := strings.Split(f, ".")
		if len(parts) < 2 {
			continue
		}
		ok := true
		for _, p := range parts {
			if p == "" || strings.Trim(p, "0123456789") != "" {
				ok = false
			}
		}
		if ok {
			return f
		}
	}
	return ""
}
