package submit

import (
	"net/url"
	"strings"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/lazyre"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/workspace"
)

// MaxTaskBytes caps the task text from any source.
const MaxTaskBytes = 1 << 20

// f names a request field in an error (catalog.Field).
var f = catalog.Field

var envNameRe = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidCheckName reports a usable check name (run.ValidCheckName).
func ValidCheckName(n string) bool { return run.ValidCheckName(n) }

// Validate checks the request's values without reading anything: the
// part of Plan that needs neither the machine nor the repository, which a
// client may call before it reads the task (the task itself is Plan's to
// check). Its errors name request fields (catalog.Field), never flags.
func Validate(req Request) error {
	switch {
	case req.AgentName != "" && req.AgentCmd != "":
		return catalog.ConflictFlags.New("%s and %s", f("agent"), f("agent_cmd"))
	case req.AgentName == "" && req.AgentCmd == "":
		return catalog.NoAgent.New("neither %s nor %s was given", f("agent"), f("agent_cmd"))
	case req.Attempts < 1:
		return catalog.BadAttempts.New("%s %d", f("attempts"), req.Attempts)
	case req.Timeout < 0:
		return catalog.BadDuration.New("%s %s is negative", f("timeout"), req.Timeout)
	case req.Network != "" && req.Network != "none" && req.Network != "allowlist":
		return catalog.BadNetwork.New("%q", req.Network)
	case req.Models.MaxTokens < 0 || req.Models.MaxCost < 0:
		return catalog.BadBudget.New("%s %d, %s %g", f("max_tokens"), req.Models.MaxTokens, f("max_cost"), req.Models.MaxCost)
	case req.Limits.DiskBytes < 0 || req.Limits.DiskInodes < 0:
		return catalog.Usage.New("%s and %s must be at least 1 (0: the backend's default)", f("disk"), f("disk_inodes"))
	case req.Export.MaxFiles < 0 || req.Export.MaxBytes < 0:
		return catalog.Usage.New("%s and %s must be at least 1 (0: the default)", f("max_files"), f("max_bytes"))
	}
	if req.Subdir != "" {
		if err := workspace.ValidatePath(strings.TrimRight(req.Subdir, "/")); err != nil {
			return catalog.Usage.New("%s %q: %v", f("subdir"), req.Subdir, err).
				WithFix("name a directory relative to the repository's top, like services/api")
		}
	}
	if err := validateWorkspace(req.Workspace); err != nil {
		return err
	}
	if err := validateBuiltin(req.Builtin); err != nil {
		return err
	}
	if err := validateChecks(req.Checks); err != nil {
		return err
	}
	for _, n := range req.EnvNames {
		if !envNameRe.MatchString(n) {
			return catalog.BadEnv.New("%q is not a variable name", n)
		}
	}
	return nil
}

// validateBuiltin checks the built-in agent's settings (zero: defaults).
func validateBuiltin(b run.AgentSpec) error {
	switch {
	case b.MaxTurns < 0:
		return catalog.Usage.New("%s must be at least 1", f("max_turns"))
	case b.ContextWindow != 0 && b.ContextWindow < 1024:
		return catalog.Usage.New("%s must be at least 1024 tokens", f("context_window"))
	case b.Temperature != nil && (*b.Temperature < 0 || *b.Temperature > 2):
		return catalog.Usage.New("%s must be between 0 and 2", f("temperature"))
	}
	if b.BaseURL != "" {
		if _, err := url.ParseRequestURI(b.BaseURL); err != nil || !strings.HasPrefix(b.BaseURL, "http") {
			return catalog.BadModelServer.New("%s %q is not an http:// or https:// URL", f("base_url"), b.BaseURL)
		}
	}
	return nil
}

// validateChecks: each check named well, once, with a command.
func validateChecks(checks []run.CheckSpec) error {
	seen := map[string]bool{}
	for _, c := range checks {
		switch {
		case !ValidCheckName(c.Name):
			return catalog.BadCheck.New("check name %q", c.Name)
		case strings.TrimSpace(c.Command) == "":
			return catalog.BadCheck.New("check %q has no command", c.Name)
		case seen[c.Name]:
			return catalog.BadCheck.New("check %q is given twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// validateTask: some text, at most MaxTaskBytes.
func validateTask(task string) error {
	if len(task) > MaxTaskBytes {
		return catalog.TaskTooLarge.New("the task is over %d bytes", MaxTaskBytes)
	}
	if strings.TrimSpace(task) == "" {
		return catalog.EmptyTask.New("the task has no text")
	}
	return nil
}
