package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/egress"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/run"
)

// OrgVersion is the organization policy file's format version.
const OrgVersion = 1

// Org is an organization policy: the bounds every run made or resumed
// under it must keep (see Check), parsed from its file and normalized, so
// that its JSON form (Canonical) is the same for the same content however
// the file is written. A rule that is nil or zero is not set: it bounds
// nothing. An empty list that is set allows nothing.
type Org struct {
	Version int `json:"version"`
	// Agents are the agents a run may use: profile names, "builtin", and
	// "command" for --agent-cmd.
	Agents []string `json:"agents,omitzero"`
	// Sandboxes are the sandbox backends a run may use.
	Sandboxes []string `json:"sandboxes,omitzero"`
	// HostSandbox lets a run use the host backend (no isolation) at all;
	// without it host is refused whatever Sandboxes says.
	HostSandbox bool `json:"host_sandbox"`
	// Images are the images a run may start from, by digest only:
	// NAME@sha256:HEX (a registry digest) or sha256:HEX (an image id).
	Images []string `json:"images,omitzero"`
	// Network are the network modes a run may use (none, allowlist).
	Network []string `json:"network,omitzero"`
	// Egress bounds the run's allowlist (what --allow and the profiles'
	// hosts add) and the setup command's.
	Egress *OrgEgress `json:"egress,omitzero"`
	// Env are the environment variable names a run may pass its agent.
	Env []string `json:"env,omitzero"`
	// Checks are required of every run: submit adds them.
	Checks []run.CheckSpec `json:"checks,omitzero"`
	// The maxima (0: no maximum). A run that leaves a bound open at
	// submit gets the maximum (see Apply).
	MaxTimeout  Duration `json:"max_timeout,omitzero"`
	MaxAttempts int      `json:"max_attempts,omitzero"`
	MaxTokens   int64    `json:"max_tokens,omitzero"`
	MaxCost     float64  `json:"max_cost,omitzero"`
	MaxDisk     int64    `json:"max_disk,omitzero"`

	// Path is the file it was read from (not part of its content).
	Path string `json:"-"`
}

// OrgEgress is the policy's egress rule: entries (HOST, *.DOMAIN, IP,
// CIDR, with ports) and presets, in canonical form.
type OrgEgress struct {
	Allow   []string `json:"allow"`
	Presets []string `json:"presets"`
}

// Duration is a time.Duration written as text ("2h0m0s") in JSON.
type Duration time.Duration

// MarshalText writes d as Go does ("1h30m0s").
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// orgFile is the file as written (TOML).
type orgFile struct {
	Version     int      `toml:"version"`
	Agents      []string `toml:"agents"`
	Sandboxes   []string `toml:"sandboxes"`
	HostSandbox bool     `toml:"host_sandbox"`
	Images      []string `toml:"images"`
	Network     []string `toml:"network"`
	Env         []string `toml:"env"`
	Egress      struct {
		Allow   []string `toml:"allow"`
		Presets []string `toml:"presets"`
	} `toml:"egress"`
	Checks []struct {
		Name    string `toml:"name"`
		Command string `toml:"command"`
	} `toml:"checks"`
	MaxTimeout  string  `toml:"max_timeout"`
	MaxAttempts int     `toml:"max_attempts"`
	MaxTokens   int64   `toml:"max_tokens"`
	MaxCost     float64 `toml:"max_cost"`
	MaxDisk     string  `toml:"max_disk"`
}

// OrgKeys are the policy file's keys, as the README documents them.
var OrgKeys = []string{"version", "agents", "sandboxes", "host_sandbox", "images", "network",
	"egress.allow", "egress.presets", "env", "checks.name", "checks.command",
	"max_timeout", "max_attempts", "max_tokens", "max_cost", "max_disk"}

// LoadOrg reads the policy file at path. A missing, unreadable or invalid
// file is a catalog.BadPolicy error naming it: a policy that was asked for
// is never silently ignored.
func LoadOrg(path string) (*Org, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, catalog.BadPolicy.New("the policy file %s does not exist", path)
	}
	if err != nil {
		return nil, catalog.BadPolicy.Wrap(err, "%s: %v", path, err)
	}
	return ParseOrg(b, path)
}

var (
	nameRe   = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	envRe    = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	digestRe = lazyre.New(`^([a-z0-9][a-z0-9._/:-]*@)?sha256:[0-9a-f]{64}$`)
)

// ParseOrg parses a policy file's content (path names it in errors).
// Errors are catalog.BadPolicy errors naming the key.
func ParseOrg(b []byte, path string) (*Org, error) {
	bad := func(format string, a ...any) error {
		return catalog.BadPolicy.New("%s: "+format, append([]any{path}, a...)...)
	}
	var f orgFile
	md, err := toml.Decode(string(b), &f)
	if err != nil {
		return nil, catalog.BadPolicy.Wrap(err, "%s: %v", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, bad("unknown key %q (the keys: %s)", und[0].String(), strings.Join(OrgKeys, ", "))
	}
	if !md.IsDefined("version") {
		return nil, bad("version is missing: write version = %d first", OrgVersion)
	}
	if f.Version != OrgVersion {
		return nil, bad("version = %d: this agentrun reads version %d", f.Version, OrgVersion)
	}
	o := &Org{Version: f.Version, HostSandbox: f.HostSandbox, Path: path}
	var errs []error
	list := func(key string, in []string, valid func(string) bool, want string) []string {
		if !md.IsDefined(key) {
			return nil
		}
		for _, v := range in {
			if !valid(v) {
				errs = append(errs, bad("%s: %q is not %s", key, v, want))
			}
		}
		return set(in)
	}
	o.Agents = list("agents", f.Agents, nameRe.MatchString, "an agent name")
	o.Sandboxes = list("sandboxes", f.Sandboxes, nameRe.MatchString, "a sandbox backend name")
	o.Images = list("images", f.Images, digestRe.MatchString, "an image by digest (NAME@sha256:HEX or sha256:HEX; tags are refused: a tag can name another image tomorrow)")
	o.Network = list("network", f.Network, func(v string) bool { return v == "none" || v == "allowlist" }, "a network mode (none, allowlist)")
	o.Env = list("env", f.Env, envRe.MatchString, "a variable name")
	if err := errors.Join(errs...); err != nil {
		return nil, firstError(err)
	}
	if slices.Contains(o.Sandboxes, "host") && !o.HostSandbox {
		return nil, bad("sandboxes names host, and host_sandbox is not true: the host sandbox isolates nothing; say host_sandbox = true to allow it")
	}
	if md.IsDefined("egress", "allow") || md.IsDefined("egress", "presets") {
		eg, err := parseEgress(f.Egress.Allow, f.Egress.Presets, bad)
		if err != nil {
			return nil, err
		}
		o.Egress = eg
	}
	if md.IsDefined("checks") {
		o.Checks = []run.CheckSpec{}
	}
	for _, c := range f.Checks {
		switch {
		case !run.ValidCheckName(c.Name):
			return nil, bad("checks: name %q: use letters, digits, '-', '_' and '.'", c.Name)
		case strings.TrimSpace(c.Command) == "":
			return nil, bad("checks: %q has no command", c.Name)
		case slices.ContainsFunc(o.Checks, func(x run.CheckSpec) bool { return x.Name == c.Name }):
			return nil, bad("checks: %q is given twice", c.Name)
		}
		o.Checks = append(o.Checks, run.CheckSpec{Name: c.Name, Command: c.Command})
	}
	// The required checks run in the file's order, as a run's own do:
	// their order is content.
	if err := o.parseMaxima(f, md, bad); err != nil {
		return nil, err
	}
	return o, nil
}

func (o *Org) parseMaxima(f orgFile, md toml.MetaData, bad func(string, ...any) error) error {
	if md.IsDefined("max_timeout") {
		d, err := time.ParseDuration(f.MaxTimeout)
		if err != nil || d <= 0 {
			return bad("max_timeout = %q: want a duration like 30m or 2h", f.MaxTimeout)
		}
		o.MaxTimeout = Duration(d)
	}
	if md.IsDefined("max_disk") {
		n, err := run.ParseSize(f.MaxDisk)
		if err != nil || n < 1 {
			return bad("max_disk = %q: want a size like 10G", f.MaxDisk)
		}
		o.MaxDisk = n
	}
	for _, k := range []struct {
		key string
		bad bool
	}{{"max_attempts", f.MaxAttempts < 1}, {"max_tokens", f.MaxTokens < 1}, {"max_cost", !(f.MaxCost > 0)}} {
		if md.IsDefined(k.key) && k.bad {
			return bad("%s: want more than 0 (leave the key out for no maximum)", k.key)
		}
	}
	o.MaxAttempts, o.MaxTokens, o.MaxCost = f.MaxAttempts, f.MaxTokens, f.MaxCost
	return nil
}

// parseEgress checks and normalizes the egress rule: entries in their
// canonical form (presets have their own key), presets known.
func parseEgress(allow, presets []string, bad func(string, ...any) error) (*OrgEgress, error) {
	eg := &OrgEgress{Allow: []string{}, Presets: []string{}}
	for _, a := range allow {
		e, err := egress.ParseEntry(a)
		if err != nil {
			return nil, bad("egress.allow: %v", err)
		}
		if e.Kind == egress.KindPreset {
			return nil, bad("egress.allow: %q: name presets in egress.presets", a)
		}
		eg.Allow = append(eg.Allow, e.String())
	}
	for _, p := range presets {
		if _, ok := egress.PresetEntries(p); !ok {
			return nil, bad("egress.presets: %q is not one of: %s", p, strings.Join(egress.Presets(), ", "))
		}
	}
	eg.Allow, eg.Presets = set(eg.Allow), set(presets)
	return eg, nil
}

// firstError is the first of joined errors (one named key at a time).
func firstError(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) > 0 {
		return j.Unwrap()[0]
	}
	return err
}

// Canonical is the policy's content as canonical JSON: keys in a fixed
// order, sets sorted and deduplicated, durations and sizes normalized.
// Two files that say the same thing have the same bytes.
func (o *Org) Canonical() []byte {
	b, err := json.Marshal(o)
	if err != nil {
		panic(err) // plain data; cannot fail
	}
	return b
}

// Digest is "sha256:<hex>" of the canonical bytes ("" for no policy).
func (o *Org) Digest() string {
	if o == nil {
		return ""
	}
	sum := sha256.Sum256(o.Canonical())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// String names the policy in messages.
func (o *Org) String() string {
	return fmt.Sprintf("the organization policy %s (%.19s)", o.Path, o.Digest())
}
