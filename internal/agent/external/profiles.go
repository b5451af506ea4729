package external

import (
	"slices"
	"sort"
)

// Profile describes one external agent CLI.
type Profile struct {
	Name string
	// Command is run with sh -c inside the sandbox, the prompt on stdin.
	Command string
	// Env lists the names of host variables the agent may receive (API
	// keys, base URLs). Only those set in the submitting environment are
	// passed; their values are never stored.
	Env []string
	// Hosts are the API hosts the agent needs (allowed by default under
	// --network allowlist).
	Hosts []string
	// Doc is one line for --help.
	Doc string
}

// profiles is the table of built-in agent profiles. Each command reads the
// task from stdin; "$(cat)" passes stdin as one argument without the shell
// interpreting its content.
var profiles = []Profile{
	{
		Name:    "claude",
		Command: `claude -p --dangerously-skip-permissions --output-format text`,
		Env:     []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "CLAUDE_CODE_OAUTH_TOKEN"},
		Hosts:   []string{"api.anthropic.com", "statsig.anthropic.com"},
		Doc:     "Claude Code in print mode",
	},
	{
		Name:    "codex",
		Command: `codex exec --full-auto --skip-git-repo-check -`,
		Env:     []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"},
		Hosts:   []string{"api.openai.com", "chatgpt.com"},
		Doc:     "Codex CLI, exec mode (prompt from stdin)",
	},
	{
		Name:    "gemini",
		Command: `gemini --yolo -p "$(cat)"`,
		Env:     []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT"},
		Hosts:   []string{"generativelanguage.googleapis.com", "oauth2.googleapis.com", "cloudcode-pa.googleapis.com"},
		Doc:     "Gemini CLI, non-interactive with auto-approval",
	},
	{
		Name:    "qwen",
		Command: `qwen --yolo -p "$(cat)"`,
		Env:     []string{"DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"},
		Hosts:   []string{"dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com", "chat.qwen.ai", "portal.qwen.ai"},
		Doc:     "Qwen Code, non-interactive with auto-approval",
	},
	{
		Name:    "crush",
		Command: `crush run --quiet "$(cat)"`,
		Env:     []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY", "GROQ_API_KEY"},
		Hosts:   []string{"api.anthropic.com", "api.openai.com", "openrouter.ai", "generativelanguage.googleapis.com", "api.groq.com", "catwalk.charm.sh"},
		Doc:     "Crush, non-interactive run",
	},
	{
		Name:    "opencode",
		Command: `opencode run "$(cat)"`,
		Env:     []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY"},
		Hosts:   []string{"api.anthropic.com", "api.openai.com", "openrouter.ai", "generativelanguage.googleapis.com", "models.dev", "opencode.ai"},
		Doc:     "opencode, non-interactive run",
	},
}

// CommandName is the AgentSpec.Name of an agent given with --agent-cmd.
const CommandName = "command"

// Lookup returns the profile called name.
func Lookup(name string) (Profile, bool) {
	for _, p := range profiles {
		if p.Name == name {
			p.Env, p.Hosts = slices.Clone(p.Env), slices.Clone(p.Hosts)
			return p, true
		}
	}
	return Profile{}, false
}

// Names lists the profile names, sorted.
func Names() []string {
	var n []string
	for _, p := range profiles {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return n
}

// Profiles returns a copy of the table (for help text).
func Profiles() []Profile {
	out := make([]Profile, 0, len(profiles))
	for _, p := range profiles {
		q, _ := Lookup(p.Name)
		q.Doc = p.Doc
		out = append(out, q)
	}
	return out
}
