package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a Server.
type Options struct {
	// Exec runs one agentrun command line in process (required).
	Exec Exec
	// Version is agentrun's version, told to clients.
	Version string
}

// Server is the MCP server: the SDK's server with agentrun's tools and
// resources.
type Server struct {
	exec Exec
	srv  *sdk.Server
}

const instructions = `agentrun runs coding-agent tasks as isolated, recoverable jobs. A typical
round: submit a task (with checks that decide whether the result is good);
follow it with logs (follow: true, then pass back the cursor of each answer
until done is true) or submit with wait: true; read the patch with diff (or
the resource agentrun://runs/{id}/patch); record the verdict; resume a run
that failed or was interrupted. Every result is the --json document of the
agentrun command of the same name; an error is a tool error carrying the
error catalog's {"error": {code, error, cause, fix, doc, exit_code}}.`

// New returns a server whose tools run command lines through o.Exec.
func New(o Options) *Server {
	s := &Server{exec: o.Exec}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "agentrun", Title: "AgentRun", Version: o.Version},
		&sdk.ServerOptions{Instructions: instructions})
	s.addTools()
	s.addResources()
	return s
}

// MCP is the SDK server, to be served on a transport.
func (s *Server) MCP() *sdk.Server { return s.srv }

func boolPtr(b bool) *bool { return &b }

// readOnly annotates a tool that changes nothing.
func readOnly(title string) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, ReadOnlyHint: true, OpenWorldHint: boolPtr(false)}
}

// acting annotates a tool that changes a run.
func acting(title string, destructive, idempotent bool) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, DestructiveHint: boolPtr(destructive), IdempotentHint: idempotent, OpenWorldHint: boolPtr(false)}
}

// simple adds a tool that runs one command line built from its input.
func simple[In any](s *Server, t *sdk.Tool, args func(In) []string) {
	sdk.AddTool(s.srv, t, func(ctx context.Context, _ *sdk.CallToolRequest, in In) (*sdk.CallToolResult, any, error) {
		return s.run(ctx, args(in), "").result(), nil, nil
	})
}

func (s *Server) addTools() {
	sdk.AddTool(s.srv, &sdk.Tool{Name: "submit", Annotations: acting("Start a run", false, false),
		Description: `Start a run: the agent works on its own copy of the repository's base commit inside a sandbox; after each attempt the checks run in the same sandbox; a run whose checks all pass is exported as one commit on branch agentrun/<id> plus a patch. The task reaches the agent on stdin, never through a shell. Give agent (a profile, or builtin) or agent_cmd. Returns the run as 'agentrun submit --json' prints it: {id, status, reason, branch, commit, patch, run_dir}. With wait: true the call returns when the run has ended, and sends a progress notification for each journal event on the request's progress token.`,
	}, s.submit)
	simple(s, &sdk.Tool{Name: "list", Annotations: readOnly("List runs"),
		Description: `List runs, newest first, with filters; as 'agentrun list --json': {runs: [...], broken: [...]}.`,
	}, ListInput.argv)
	simple(s, &sdk.Tool{Name: "status", Annotations: readOnly("A run's record"),
		Description: `A run's whole record (state, attempts, checks, usage, result, provenance), as 'agentrun status --json'.`,
	}, func(in IDInput) []string { return command("status").args(in.ID) })
	sdk.AddTool(s.srv, &sdk.Tool{Name: "logs", Annotations: readOnly("A run's output and journal"),
		Description: `A run's output. Without follow: the whole logs as 'agentrun logs --json' ({id, logs: [{attempt, kind, name, text, transcript}]}, or {id, events} with events: true). With follow: true (or a cursor): only what is new since the cursor, {id, run, events, output: [{attempt, kind, name, offset, text}], cursor, done}; pass the answer's cursor back to get what is new next, until done is true (the run has ended and everything was read). wait_seconds makes a follow call wait for news instead of answering empty.`,
	}, s.logs)
	simple(s, &sdk.Tool{Name: "result", Annotations: readOnly("A finished run's result"),
		Description: `A finished run's result: how it ended, checks, the export (branch, commit, diffstat, refused files), usage; the patch text too with patch: true. As 'agentrun result --json'.`,
	}, ResultInput.argv)
	simple(s, &sdk.Tool{Name: "diff", Annotations: readOnly("A run's patch"),
		Description: `The run's patch, as 'agentrun diff --json': {id, patch}. A run that exported nothing is the no_patch error. Also the resource agentrun://runs/{id}/patch.`,
	}, func(in IDInput) []string { return command("diff").args(in.ID) })
	simple(s, &sdk.Tool{Name: "cancel", Annotations: acting("Cancel a run", true, true),
		Description: `Cancel a run: a queued run never starts; a running agent is stopped and the run ends cancelled. Waits for the run to end unless no_wait. Cancelling a run that has ended changes nothing. As 'agentrun cancel --json': {id, status, reason, already_ended}.`,
	}, CancelInput.argv)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "resume", Annotations: acting("Resume a run", false, false),
		Description: `Continue an interrupted or failed run on its own workspace with new attempts; task adds instructions. Returns the run as 'agentrun resume --json' prints it; with wait: true, when it has ended, with progress notifications as for submit.`,
	}, s.resume)
	simple(s, &sdk.Tool{Name: "verdict", Annotations: acting("Record a verdict", false, true),
		Description: `Record the reviewer's verdict on a finished run: accept or reject, with an optional note. As 'agentrun verdict --json'.`,
	}, VerdictInput.argv)
	simple(s, &sdk.Tool{Name: "egress", Annotations: readOnly("A run's network decisions"),
		Description: `The run's network decisions: each connection the sandbox asked for, allowed or denied and why, as 'agentrun egress --json'.`,
	}, func(in IDInput) []string { return command("egress").args(in.ID) })
}

func (s *Server) submit(ctx context.Context, req *sdk.CallToolRequest, in SubmitInput) (*sdk.CallToolResult, any, error) {
	o := s.run(ctx, in.argv(), in.Task)
	if o.err == nil && in.Wait {
		o = s.await(ctx, req, o)
	}
	return o.result(), nil, nil
}

func (s *Server) resume(ctx context.Context, req *sdk.CallToolRequest, in ResumeInput) (*sdk.CallToolResult, any, error) {
	o := s.run(ctx, in.argv(), "")
	if o.err == nil && in.Wait {
		o = s.await(ctx, req, o)
	}
	return o.result(), nil, nil
}
