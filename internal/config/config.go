// Package config reads agentrun's configuration file
// ($XDG_CONFIG_HOME/agentrun/config.toml) and the environment variables that
// override it, and resolves the effective settings with the precedence
// flag > environment > config file > default.
//
// Contract: Load never creates files; a missing file is not an error, an
// unreadable or malformed one (including unknown keys) is a catalog
// BadConfig error naming the file. It never reads secrets: it names where
// keys come from (an environment variable, a key file, a key command) and
// the model gateway reads them on the host when a run starts.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// Defaults.
const (
	DefaultMaxParallel = 4
	DefaultAttempts    = 2
	DefaultTimeout     = time.Hour
	DefaultMaxFiles    = 10000
	DefaultMaxBytes    = 100 << 20
	// DefaultCacheBudget bounds the overlay workspaces' layer cache: gc
	// removes unused layers, least recently used first, past it.
	DefaultCacheBudget = 20 << 30
)

// ProviderNames are the [providers.NAME] entries config.toml may have:
// the model gateway's routes to the public APIs.
var ProviderNames = []string{"anthropic", "openai", "gemini"}

// Config is the file's content. Zero values mean "not set".
type Config struct {
	MaxParallel int    `toml:"max_parallel"`
	Sandbox     string `toml:"sandbox"`
	Attempts    int    `toml:"attempts"`
	Timeout     string `toml:"timeout"`
	AuthorName  string `toml:"author_name"`
	AuthorEmail string `toml:"author_email"`
	MaxFiles    int    `toml:"max_files"`
	MaxBytes    int64  `toml:"max_bytes"`
	// Disk ("10G") and DiskInodes bound what each run's sandbox holds
	// (workspace, HOME, /tmp); unset: the backend's default.
	Disk       string `toml:"disk"`
	DiskInodes int64  `toml:"disk_inodes"`
	// CacheBudget ("20G") bounds the layer cache of overlay workspaces.
	CacheBudget string `toml:"cache_budget"`
	// DiskBudget ("100G") bounds the runs' workspaces and the layer cache
	// together: a submit that would pass it fails at preflight.
	DiskBudget string `toml:"disk_budget"`
	// Workspace is the default --workspace (auto, copy, overlay) and
	// History the default --history (shallow, full).
	Workspace string `toml:"workspace"`
	History   string `toml:"history"`
	// Model budgets per run (0 = none).
	MaxTokens int64   `toml:"max_tokens"`
	MaxCost   float64 `toml:"max_cost"`
	// ModelServer is the default --model-server (a name below or a URL).
	ModelServer string `toml:"model_server"`
	// ModelServers are the user's own model servers, by name.
	ModelServers map[string]ModelServer `toml:"model_servers"`
	// Providers override a public API's URL or key source, by route name
	// (anthropic, openai, gemini).
	Providers map[string]Provider `toml:"providers"`
	// Prices override the built-in price table, by model name.
	Prices map[string]run.Price `toml:"prices"`
	// Image is the default --image of backends that run images (docker):
	// REF@sha256:DIGEST, an image id, or a tag pinned in Images.
	Image string `toml:"image"`
	// Images pin tags to digests ("node:22" = "sha256:..."): a tag is
	// taken as an image only when pinned here.
	Images map[string]string `toml:"images"`
	// SetupAllow is the setup command's egress allowlist (a repository's
	// .agentrun.toml can only ask for hosts; this opens them).
	SetupAllow []string `toml:"setup_allow"`
	// ToolchainCaches name the host caches runs read, read-only: go,
	// npm, pip, cargo.
	ToolchainCaches []string `toml:"toolchain_caches"`
	// Policy is the organization policy file every submit and resume
	// keeps to (a path; relative: to the config file's directory).
	Policy string `toml:"policy"`
	// Quota are a team server's default quotas of each user.
	Quota Quota `toml:"quota"`
}

// Quota are the [quota] table: a team server's default quotas of each
// user (0 or unset: no limit); an admin overrides them per user.
type Quota struct {
	ConcurrentRuns int64   `toml:"concurrent_runs"`
	RunsPerDay     int64   `toml:"runs_per_day"`
	TokensPerDay   int64   `toml:"tokens_per_day"`
	TokensPerMonth int64   `toml:"tokens_per_month"`
	CostPerDay     float64 `toml:"cost_per_day"`
	CostPerMonth   float64 `toml:"cost_per_month"`
	// Per-run maximums.
	MaxTimeout  string  `toml:"max_timeout"`
	MaxAttempts int64   `toml:"max_attempts"`
	MaxTokens   int64   `toml:"max_tokens"`
	MaxCost     float64 `toml:"max_cost"`
}

// KeySource names where a key comes from; at most one field is set.
type KeySource struct {
	APIKeyEnv     string `toml:"api_key_env"`
	APIKeyFile    string `toml:"api_key_file"`
	APIKeyCommand string `toml:"api_key_command"`
}

// ModelServer is one [model_servers.NAME] entry.
type ModelServer struct {
	URL string `toml:"url"`
	// MaxConcurrent bounds the requests in flight to it from every run on
	// this machine (0 = no bound).
	MaxConcurrent int `toml:"max_concurrent"`
	KeySource
}

// Provider is one [providers.ROUTE] entry.
type Provider struct {
	URL string `toml:"url"`
	KeySource
}

// Settings are the resolved values before flags: environment over file
// over default. Flags are applied by the command on top.
type Settings struct {
	MaxParallel int
	Sandbox     string // "" = the platform default
	Attempts    int
	Timeout     time.Duration
	AuthorName  string
	AuthorEmail string
	MaxFiles    int
	MaxBytes    int64
	DiskBytes   int64 // 0: the backend's default
	DiskInodes  int64
	CacheBudget int64
	// DiskBudget bounds the runs' workspaces and the layer cache together
	// (0: no budget).
	DiskBudget int64
	// Workspace ("auto", "copy", "overlay") and History ("shallow",
	// "full") are the defaults of --workspace and --history.
	Workspace   string
	History     string
	MaxTokens   int64
	MaxCost     float64
	ModelServer string
	// Image is the image of backends that run images ("" = none named).
	Image string
	// Policy is the organization policy file in force ("" = none): an
	// absolute path (AGENTRUN_POLICY over the file's policy).
	Policy string
	// File is the file's content (model servers, providers, prices).
	File Config
	// Path is the config file consulted (it may not exist).
	Path string
}

// Path returns the config file path for the environment.
func Path(getenv func(string) string) string {
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "agentrun", "config.toml")
	}
	return filepath.Join(getenv("HOME"), ".config", "agentrun", "config.toml")
}

// Read parses the config file at path; a missing file yields a zero Config.
func Read(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, catalog.BadConfig.Wrap(err, "%s: %v", path, err)
	}
	md, err := toml.Decode(string(b), &c)
	if err != nil {
		return c, catalog.BadConfig.Wrap(err, "%s: %v", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		e := catalog.BadConfig.New("%s: unknown key %q", path, und[0].String())
		if s := Suggest(und[0].String()); s != "" {
			e = e.WithFix("did you mean %q? Fix or remove the key in %s", s, path)
		}
		return c, e
	}
	// A setting given as 0 is a mistake, not "the default" (the flags
	// refuse it too).
	for _, k := range []struct {
		key string
		v   int64
	}{{"max_parallel", int64(c.MaxParallel)}, {"attempts", int64(c.Attempts)}, {"max_files", int64(c.MaxFiles)}, {"max_bytes", c.MaxBytes}} {
		if md.IsDefined(k.key) && k.v < 1 {
			return c, catalog.BadConfig.New("%s: %s = %d: want at least 1", path, k.key, k.v).WithFix("set %s to 1 or more in %s, or remove it for the default", k.key, path)
		}
	}
	for tag, d := range c.Images {
		if !isDigest(d) {
			return c, catalog.BadConfig.New("%s: images.%q = %q: want a digest, sha256: and 64 hex digits", path, tag, d).
				WithFix("pin the tag to its digest (docker image inspect --format '{{.Id}}' %s), or remove the entry from %s", tag, path)
		}
	}
	return c, nil
}

// isDigest reports whether d is sha256: and 64 lowercase hex digits.
func isDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	return strings.Trim(h, "0123456789abcdef") == ""
}

// Load resolves Settings from the config file and the environment.
// Environment variables: AGENTRUN_MAX_PARALLEL, AGENTRUN_SANDBOX,
// AGENTRUN_ATTEMPTS, AGENTRUN_TIMEOUT, AGENTRUN_AUTHOR_NAME,
// AGENTRUN_AUTHOR_EMAIL, AGENTRUN_MAX_FILES, AGENTRUN_MAX_BYTES,
// AGENTRUN_IMAGE, AGENTRUN_CACHE_BUDGET, AGENTRUN_DISK_BUDGET,
// AGENTRUN_WORKSPACE, AGENTRUN_HISTORY, AGENTRUN_POLICY.
func Load(getenv func(string) string) (Settings, error) {
	s := Settings{Path: Path(getenv)}
	c, err := Read(s.Path)
	if err != nil {
		return s, err
	}
	src := func(key string) string { return s.Path + ": " + key }
	// file over default
	s.MaxParallel = pick(c.MaxParallel, DefaultMaxParallel)
	s.Sandbox = c.Sandbox
	s.Attempts = pick(c.Attempts, DefaultAttempts)
	s.Timeout = DefaultTimeout
	if c.Timeout != "" {
		if s.Timeout, err = parseDuration(c.Timeout, src("timeout")); err != nil {
			return s, err
		}
	}
	s.AuthorName, s.AuthorEmail = c.AuthorName, c.AuthorEmail
	s.MaxFiles = pick(c.MaxFiles, DefaultMaxFiles)
	s.MaxBytes = pick(c.MaxBytes, DefaultMaxBytes)
	if c.Disk != "" {
		if s.DiskBytes, err = run.ParseSize(c.Disk); err != nil || s.DiskBytes < 1 {
			return s, catalog.BadConfig.New("%s: disk = %q: want a size like 10G", s.Path, c.Disk)
		}
	}
	s.DiskInodes = c.DiskInodes
	s.CacheBudget = DefaultCacheBudget
	if c.CacheBudget != "" {
		if s.CacheBudget, err = run.ParseSize(c.CacheBudget); err != nil || s.CacheBudget < 1 {
			return s, catalog.BadConfig.New("%s: cache_budget = %q: want a size like 20G", s.Path, c.CacheBudget)
		}
	}
	if err := s.workspaceFromFile(c); err != nil {
		return s, err
	}
	if c.MaxParallel < 0 || c.Attempts < 0 || c.MaxFiles < 0 || c.MaxBytes < 0 || c.MaxTokens < 0 || c.MaxCost < 0 || c.DiskInodes < 0 {
		return s, catalog.BadConfig.New("%s: negative values are not allowed", s.Path)
	}
	if err := c.checkGateway(s.Path); err != nil {
		return s, err
	}
	s.File = c
	s.MaxTokens, s.MaxCost, s.ModelServer = c.MaxTokens, c.MaxCost, c.ModelServer
	s.Image = c.Image
	if c.Policy != "" {
		s.Policy = c.Policy
		if !filepath.IsAbs(s.Policy) {
			s.Policy = filepath.Join(filepath.Dir(s.Path), s.Policy)
		}
	}
	err = s.fromEnvironment(getenv)
	return s, err
}

// fromEnvironment puts the environment over the file.
func (s *Settings) fromEnvironment(getenv func(string) string) error {
	var err error
	for _, v := range []struct {
		name string
		dst  *int
	}{{"AGENTRUN_MAX_PARALLEL", &s.MaxParallel}, {"AGENTRUN_ATTEMPTS", &s.Attempts}, {"AGENTRUN_MAX_FILES", &s.MaxFiles}} {
		if e := getenv(v.name); e != "" {
			n, err := strconv.Atoi(e)
			if err != nil || n < 1 {
				return catalog.BadConfig.New("%s=%q: want a whole number of at least 1", v.name, e)
			}
			*v.dst = n
		}
	}
	if e := getenv("AGENTRUN_MAX_BYTES"); e != "" {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil || n < 1 {
			return catalog.BadConfig.New("AGENTRUN_MAX_BYTES=%q: want a whole number of at least 1", e)
		}
		s.MaxBytes = n
	}
	if e := getenv("AGENTRUN_TIMEOUT"); e != "" {
		if s.Timeout, err = parseDuration(e, "AGENTRUN_TIMEOUT"); err != nil {
			return err
		}
	}
	if e := getenv("AGENTRUN_MAX_TOKENS"); e != "" {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil || n < 0 {
			return catalog.BadConfig.New("AGENTRUN_MAX_TOKENS=%q: want a whole number (0 = no limit)", e)
		}
		s.MaxTokens = n
	}
	if e := getenv("AGENTRUN_MAX_COST"); e != "" {
		f, err := strconv.ParseFloat(e, 64)
		if err != nil || f < 0 {
			return catalog.BadConfig.New("AGENTRUN_MAX_COST=%q: want US dollars, like 2.50 (0 = no limit)", e)
		}
		s.MaxCost = f
	}
	if e := getenv("AGENTRUN_CACHE_BUDGET"); e != "" {
		if s.CacheBudget, err = run.ParseSize(e); err != nil || s.CacheBudget < 1 {
			return catalog.BadConfig.New("AGENTRUN_CACHE_BUDGET=%q: want a size like 20G", e)
		}
	}
	if e := getenv("AGENTRUN_DISK_BUDGET"); e != "" {
		if s.DiskBudget, err = run.ParseSize(e); err != nil || s.DiskBudget < 1 {
			return catalog.BadConfig.New("AGENTRUN_DISK_BUDGET=%q: want a size like 100G", e)
		}
	}
	if e := getenv("AGENTRUN_WORKSPACE"); e != "" {
		if !ValidWorkspace(e) {
			return catalog.BadWorkspace.New("AGENTRUN_WORKSPACE=%q", e)
		}
		s.Workspace = e
	}
	if e := getenv("AGENTRUN_HISTORY"); e != "" {
		if !ValidHistory(e) {
			return catalog.BadHistory.New("AGENTRUN_HISTORY=%q", e)
		}
		s.History = e
	}
	if e := getenv("AGENTRUN_MODEL_SERVER"); e != "" {
		s.ModelServer = e
	}
	if e := getenv("AGENTRUN_SANDBOX"); e != "" {
		s.Sandbox = e
	}
	if e := getenv("AGENTRUN_IMAGE"); e != "" {
		s.Image = e
	}
	if e := getenv("AGENTRUN_POLICY"); e != "" {
		if s.Policy, err = filepath.Abs(e); err != nil {
			return catalog.BadConfig.New("AGENTRUN_POLICY=%q: %v", e, err)
		}
	}
	if e := getenv("AGENTRUN_AUTHOR_NAME"); e != "" {
		s.AuthorName = e
	}
	if e := getenv("AGENTRUN_AUTHOR_EMAIL"); e != "" {
		s.AuthorEmail = e
	}
	return nil
}

// workspaceFromFile takes the workspace settings of the file: the disk
// budget, the workspace mode and the history mode.
func (s *Settings) workspaceFromFile(c Config) error {
	if c.DiskBudget != "" {
		n, err := run.ParseSize(c.DiskBudget)
		if err != nil || n < 1 {
			return catalog.BadConfig.New("%s: disk_budget = %q: want a size like 100G", s.Path, c.DiskBudget)
		}
		s.DiskBudget = n
	}
	if c.Workspace != "" && !ValidWorkspace(c.Workspace) {
		return catalog.BadWorkspace.New("%s: workspace = %q", s.Path, c.Workspace)
	}
	if c.History != "" && !ValidHistory(c.History) {
		return catalog.BadHistory.New("%s: history = %q", s.Path, c.History)
	}
	s.Workspace, s.History = c.Workspace, c.History
	return nil
}

// ValidWorkspace reports a workspace mode: auto, copy or overlay.
func ValidWorkspace(m string) bool {
	return m == run.WorkspaceAuto || m == run.WorkspaceCopy || m == run.WorkspaceOverlay
}

// ValidHistory reports a history mode: shallow or full.
func ValidHistory(h string) bool { return h == run.HistoryShallow || h == run.HistoryFull }

func parseDuration(v, where string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, catalog.BadConfig.New("%s: %q is not a duration like 90s, 30m or 2h", where, v)
	}
	return d, nil
}

func pick[T int | int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// String is for debugging.
func (s Settings) String() string {
	return fmt.Sprintf("max_parallel=%d sandbox=%q attempts=%d timeout=%s", s.MaxParallel, s.Sandbox, s.Attempts, s.Timeout)
}

// checkGateway validates the model server, provider and price entries.
func (c Config) checkGateway(path string) error {
	for name, m := range c.ModelServers {
		if !validName(name) {
			return catalog.BadConfig.New("%s: model_servers.%q: use letters, digits, '-' and '_'", path, name)
		}
		if m.URL == "" {
			return catalog.BadConfig.New("%s: model_servers.%s has no url", path, name)
		}
		if m.MaxConcurrent < 0 {
			return catalog.BadConfig.New("%s: model_servers.%s.max_concurrent is negative", path, name)
		}
		if err := m.KeySource.check(path, "model_servers."+name); err != nil {
			return err
		}
	}
	for name, p := range c.Providers {
		if !slices.Contains(ProviderNames, name) {
			return catalog.BadConfig.New("%s: providers.%q: the providers are %s", path, name, strings.Join(ProviderNames, ", "))
		}
		if err := p.KeySource.check(path, "providers."+name); err != nil {
			return err
		}
	}
	for name, p := range c.Prices {
		if p.Input < 0 || p.Output < 0 || (p.CachedInput != nil && *p.CachedInput < 0) || (p.CacheWrite != nil && *p.CacheWrite < 0) {
			return catalog.BadConfig.New("%s: prices.%q: prices are US dollars per million tokens, not negative", path, name)
		}
	}
	return nil
}

func (k KeySource) check(path, where string) error {
	n := 0
	for _, v := range []string{k.APIKeyEnv, k.APIKeyFile, k.APIKeyCommand} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return catalog.BadConfig.New("%s: %s: give one of api_key_env, api_key_file, api_key_command", path, where)
	}
	return nil
}

func validName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
