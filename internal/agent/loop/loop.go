package loop

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/agent/provider"
	"github.com/agentrun/agentrun/internal/agent/tools"
	"github.com/agentrun/agentrun/internal/agent/transcript"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

//go:embed system.md
var systemPrompt string

// Defaults of the loop rules.
const (
	DefaultMaxTurns   = 100
	DefaultStallTurns = 12
	StuckRepeats      = 4
)

// Options are the host-side inputs of the built-in agent.
type Options struct {
	// Getenv reads API keys and AGENTRUN_CONTEXT_WINDOW (default os.Getenv).
	Getenv func(string) string
	// HTTPClient talks to the model server (default http.DefaultClient).
	HTTPClient *http.Client
	// Repo and Base locate AGENTS.md/CLAUDE.md: the user's repository and
	// the base commit, read with git plumbing, never from the workspace.
	Repo string
	Base string
	// Warn receives warnings for the user (unknown context window, ...).
	Warn func(string)
	// Providers are the model providers to pick spec.Provider from.
	Providers provider.Registry
	// WindowCache, when set, remembers the server's context windows
	// between runs.
	WindowCache *WindowCache
	// Retry bounds the provider's retries (zero: provider.DefaultRetry).
	Retry provider.Retry
	// StallTurns overrides DefaultStallTurns (tests; zero: default).
	StallTurns int
}

// Agent is the built-in agent. It implements agent.Agent.
type Agent struct {
	spec run.AgentSpec
	opts Options
	prov provider.Provider

	once         sync.Once
	window       int
	windowSource string
	system       string
	instrName    string
}

// New validates the spec and builds the provider. It makes no network
// call; errors are catalog errors.
func New(spec run.AgentSpec, opts Options) (agent.Agent, error) {
	return newAgent(spec, opts)
}

func newAgent(spec run.AgentSpec, opts Options) (*Agent, error) {
	if strings.TrimSpace(spec.Model) == "" {
		return nil, catalog.NoModel.New("the built-in agent needs --model")
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	a := &Agent{spec: spec, opts: opts}
	kind, ok := opts.Providers.Lookup(spec.Provider)
	if !ok {
		return nil, catalog.Usage.New("unknown provider %q", spec.Provider).
			WithFix("name one of: %s (openai speaks to any OpenAI-compatible server)", strings.Join(opts.Providers.Names(), ", "))
	}
	key := ""
	for _, k := range kind.KeyEnv {
		if key = opts.Getenv(k); key != "" {
			break
		}
	}
	if key == "" && kind.RequiresKey {
		return nil, catalog.ModelAuth.New("%s is not set", strings.Join(kind.KeyEnv, " or "))
	}
	a.prov = kind.New(provider.Config{BaseURL: spec.BaseURL, APIKey: key, HTTPClient: opts.HTTPClient, Retry: opts.Retry})
	return a, nil
}

func (a *Agent) getenv(k string) string { return a.opts.Getenv(k) }

func (a *Agent) warn(msg string) {
	if a.opts.Warn != nil {
		a.opts.Warn(msg)
	}
}

func (a *Agent) maxTurns() int {
	if a.spec.MaxTurns > 0 {
		return a.spec.MaxTurns
	}
	return DefaultMaxTurns
}

func (a *Agent) stallTurns() int {
	if a.opts.StallTurns > 0 {
		return a.opts.StallTurns
	}
	return DefaultStallTurns
}

// prepare resolves what stays fixed for the agent's life: the context
// window and the system prompt (so the prompt prefix is stable).
func (a *Agent) prepare(ctx context.Context, workDir, startDir string) {
	a.once.Do(func() {
		a.window, a.windowSource = a.resolveWindow(ctx)
		var b strings.Builder
		b.WriteString(strings.TrimSpace(systemPrompt))
		if workDir != "" {
			b.WriteString("\n\nThe workspace root is " + workDir + ".")
		}
		if startDir != "" && startDir != workDir {
			// The tools' paths stay relative to the root; the user's may
			// not be.
			b.WriteString(" The user gave the task in " + startDir + ": paths in it may be relative to that directory, and the checks run there.")
		}
		name, text := repoInstructions(ctx, a.opts.Repo, a.opts.Base, a.warn)
		if name != "" {
			a.instrName = name
			b.WriteString("\n\n# Repository instructions (" + name + ")\n\n" + strings.TrimSpace(text))
		}
		a.system = b.String()
	})
}

// attempt is the state of one Attempt.
type attempt struct {
	a    *Agent
	in   agent.AttemptInput
	env  *tools.Env
	tr   *transcriptWriter
	out  io.Writer
	msgs []provider.Message
	defs []provider.Tool
	bud  budget

	turn  int
	usage run.Usage
	fails failures
	// final: the model error is one another attempt cannot fix.
	final    bool
	seen     map[string]bool
	noProg   int
	nudged   bool
	lastFail string
	failRuns int
	spillSeq int
	// scale corrects the byte-based token estimate by what the server
	// reported (never below 1); overflows counts context-length refusals.
	scale     float64
	overflows int
	compacted int // conversation length right after the last compaction
}

// Attempt runs one attempt of the built-in agent (agent.Agent).
func (a *Agent) Attempt(ctx context.Context, in agent.AttemptInput) (*agent.Outcome, error) {
	if in.Runner == nil {
		return nil, errors.New("builtin agent: no runner")
	}
	for _, d := range []string{in.Dir, in.RunDir} {
		if d == "" {
			return nil, errors.New("builtin agent: attempt and run directories are required")
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("builtin agent: %w", err)
		}
	}
	a.prepare(ctx, in.WorkDir, in.StartDir)
	tr, err := openTranscript(filepath.Join(in.Dir, transcript.File))
	if err != nil {
		return nil, err
	}
	st := &attempt{a: a, in: in, tr: tr, out: in.Output, defs: tools.Definitions(), bud: newBudget(a.window), seen: map[string]bool{}, scale: 1}
	if st.out == nil {
		st.out = io.Discard
	}
	st.env = &tools.Env{Runner: in.Runner, WorkDir: in.WorkDir, SpillDir: filepath.Join(in.RunDir, "spill"), CmdEnv: a.commandEnv(in.Env)}
	prev, err := loadConversation(in.RunDir)
	if err != nil {
		tr.close()
		return nil, err
	}
	st.msgs = append(prev, provider.Message{Role: provider.RoleUser, Content: in.Prompt})
	settings := map[string]any{"max_turns": a.maxTurns(), "stall_turns": a.stallTurns(), "result_cap_bytes": st.bud.resultCap}
	if a.spec.Temperature != nil {
		settings["temperature"] = *a.spec.Temperature
	}
	if a.spec.BaseURL != "" {
		settings["base_url"] = redactURL(a.spec.BaseURL)
	}
	if a.instrName != "" {
		settings["instructions"] = a.instrName
	}
	if len(prev) > 0 {
		settings["continued_messages"] = len(prev)
	}
	tr.add(transcript.Record{Type: transcript.RecRunStart, Attempt: in.N, Model: a.spec.Model, Provider: a.prov.Name(), ContextWindow: a.window, WindowSource: a.windowSource, Settings: settings})
	fmt.Fprintf(st.out, "builtin agent: %s via %s, context window %d tokens (%s)\n", a.spec.Model, a.prov.Name(), a.window, a.windowSource)

	reason, msg, herr := st.run(ctx)
	if serr := saveConversation(in.RunDir, st.msgs, true); serr != nil && herr == nil {
		herr = serr
	}
	usage := st.usage
	tr.add(transcript.Record{Type: transcript.RecRunEnd, Attempt: in.N, Status: string(reason), Message: msg, Turns: st.turn, Usage: &usage})
	if cerr := tr.close(); cerr != nil && herr == nil {
		herr = fmt.Errorf("write transcript: %w", cerr)
	}
	fmt.Fprintf(st.out, "builtin agent: %s after %d turns (%d prompt, %d completion tokens)\n", reason, st.turn, usage.PromptTokens, usage.CompletionTokens)
	if herr != nil {
		return nil, herr
	}
	return &agent.Outcome{Reason: reason, Message: msg, Usage: &usage, Final: reason == run.ReasonModelError && st.final}, nil
}

// keyVars are the variables holding the loop's API keys.
var keyVars = []string{"OPENAI_API_KEY", "AGENTRUN_OPENAI_API_KEY", "ANTHROPIC_API_KEY"}

// commandEnv is the run's agent environment for commands, without any
// variable that holds (or whose value is) an API key the loop uses.
func (a *Agent) commandEnv(env []string) []string {
	var keys []string
	for _, k := range keyVars {
		if v := a.getenv(k); v != "" {
			keys = append(keys, v)
		}
	}
	var out []string
outer:
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		for _, k := range keyVars {
			if name == k {
				continue outer
			}
		}
		for _, k := range keys {
			if strings.Contains(val, k) {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}

// redact replaces any API key the loop holds in s.
func (a *Agent) redact(s string) string {
	for _, k := range keyVars {
		if v := a.getenv(k); len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// redactURL drops credentials and the query from a URL for the record.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func ctxReason(ctx context.Context) run.Reason {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return run.ReasonTimeout
	}
	return run.ReasonCancelled
}

// run is the turn loop. A non-nil error means the harness failed.
func (st *attempt) run(ctx context.Context) (run.Reason, string, error) {
	a := st.a
	for {
		if ctx.Err() != nil {
			return ctxReason(ctx), "stopped after turn " + fmt.Sprint(st.turn), nil
		}
		if st.turn >= a.maxTurns() {
			return run.ReasonMaxTurns, fmt.Sprintf("reached the limit of %d turns", a.maxTurns()), nil
		}
		if ok, err := st.fitBudget(ctx); err != nil {
			if ctx.Err() != nil {
				return ctxReason(ctx), "stopped while compacting", nil
			}
			return "", "", err
		} else if !ok {
			return run.ReasonContextExhausted, fmt.Sprintf("the conversation does not fit the context window of %d tokens even after compaction", st.bud.window), nil
		}
		st.turn++
		req := provider.Request{Model: a.spec.Model, System: a.system, Messages: st.msgs, Tools: st.defs, Temperature: a.spec.Temperature}
		est := estimate(a.system, st.defs, st.msgs)
		resp, err := a.prov.Chat(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				st.turn--
				return ctxReason(ctx), "stopped while waiting for the model", nil
			}
			if contextOverflow(err) {
				// The server counts more tokens than estimated: assume
				// more, so the budget trims or compacts, and ask again.
				st.turn--
				st.overflows++
				if st.overflows > 3 {
					return run.ReasonContextExhausted, "the model server refused the conversation as too long: " + transcript.OneLine(err.Error(), 300), nil
				}
				st.scale *= 1.5
				st.warnf("the server says the context is too long; assuming %.1fx more tokens than estimated", st.scale)
				continue
			}
			msg := err.Error()
			if ce, ok := catalog.As(err); ok && ce.Fix != "" {
				msg += " (" + ce.Fix + ")"
			}
			st.final = catalog.ModelUnreachable.Is(err) || catalog.ModelAuth.Is(err) || catalog.ModelNotLoaded.Is(err)
			// A server may echo the key in its error body.
			return run.ReasonModelError, a.redact(msg), nil
		}
		st.addUsage(resp)
		if resp.UsageKnown && resp.Usage.PromptTokens > 0 && est > 0 {
			if r := float64(resp.Usage.PromptTokens) / float64(est); r > st.scale {
				st.scale = min(r, 4)
			}
		}
		m := resp.Message
		m.Role = provider.RoleAssistant
		for i := range m.ToolCalls {
			if m.ToolCalls[i].ID == "" {
				m.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", st.turn, i+1)
			}
		}
		st.msgs = append(st.msgs, m)
		var turnUsage *run.Usage
		if resp.UsageKnown {
			turnUsage = &run.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens, CachedTokens: max(resp.Usage.CachedTokens, 0)}
		}
		st.tr.add(transcript.Record{Type: transcript.RecAssistant, Attempt: st.in.N, Turn: st.turn, Content: m.Content, Reasoning: m.Reasoning, ToolCalls: m.ToolCalls, FinishReason: resp.FinishReason, Usage: turnUsage})

		var reason run.Reason
		var msg string
		progress := false
		if len(m.ToolCalls) > 0 {
			reason, msg, progress, err = st.runCalls(ctx, m.ToolCalls)
			if err != nil {
				return "", "", err
			}
		} else {
			reason, msg = st.noCall(resp)
		}
		if err := saveConversation(st.in.RunDir, st.msgs, false); err != nil {
			return "", "", err
		}
		if reason != "" {
			return reason, msg, nil
		}
		if progress {
			st.noProg, st.nudged = 0, false
			continue
		}
		st.noProg++
		if st.noProg >= a.stallTurns() {
			return run.ReasonStalled, fmt.Sprintf("no file changed and no new output for %d turns", st.noProg), nil
		}
		if st.noProg >= a.stallTurns()/2 && !st.nudged {
			st.nudged = true
			st.nudge(nudgeStalledPref + fmt.Sprint(st.noProg) + nudgeStalledSuff)
		}
	}
}

func (st *attempt) warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	st.tr.add(transcript.Record{Type: transcript.RecWarning, Attempt: st.in.N, Turn: st.turn, Text: msg})
	st.a.warn(msg)
}

// contextOverflow reports whether a model error says the prompt is longer
// than the model's context (OpenAI, vLLM, llama.cpp, LM Studio, Anthropic
// wordings).
func contextOverflow(err error) bool {
	s := strings.ToLower(err.Error())
	for _, k := range []string{"context_length_exceeded", "maximum context length", "context length", "context window",
		"exceeds the context", "prompt is too long", "too many tokens", "exceed_context_size", "n_ctx"} {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

func (st *attempt) addUsage(resp *provider.Response) {
	st.usage.Turns++
	if !resp.UsageKnown {
		return
	}
	st.usage.PromptTokens += max(resp.Usage.PromptTokens, 0)
	st.usage.CompletionTokens += max(resp.Usage.CompletionTokens, 0)
	st.usage.CachedTokens += max(resp.Usage.CachedTokens, 0)
}

func (st *attempt) nudge(text string) {
	st.msgs = append(st.msgs, provider.Message{Role: provider.RoleUser, Content: text})
	st.tr.add(transcript.Record{Type: transcript.RecNudge, Attempt: st.in.N, Turn: st.turn, Text: text})
	fmt.Fprintf(st.out, "turn %d: nudge: %s\n", st.turn, text)
}

// noCall handles a reply without tool calls.
func (st *attempt) noCall(resp *provider.Response) (run.Reason, string) {
	kind := classify(resp)
	var text, fail string
	switch kind {
	case replyAnswer:
		fmt.Fprintf(st.out, "turn %d: answer: %s\n", st.turn, transcript.OneLine(resp.Message.Content, 200))
		return run.ReasonCompleted, strings.TrimSpace(stripThink(resp.Message.Content))
	case replyTruncated:
		text = nudgeTruncated
	case replyEmpty:
		text, fail = nudgeEmpty, failEmpty
	case replyThinking:
		text, fail = nudgeThinking, failEmpty
	case replyTextCall:
		text, fail = nudgeTextCall, failMalformedCall
	}
	fmt.Fprintf(st.out, "turn %d: %s reply\n", st.turn, kind)
	if fail != "" && st.fails.add(fail) {
		return run.ReasonModelError, st.failMessage()
	}
	st.nudge(text)
	return "", ""
}

func (st *attempt) failMessage() string {
	return fmt.Sprintf("the model failed too often (%d failures, the last %d in a row of kind %s)", st.fails.total, st.fails.row, st.fails.last)
}
