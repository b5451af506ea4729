package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/mcp"
)

type mcpOptions struct {
	Listen    string
	ListenAny bool
}

// Validate refuses an address off the loopback unless --listen-any says
// so: the server has no authentication of its own, and whoever reaches it
// can start runs.
func (o *mcpOptions) Validate() error {
	if o.Listen == "" {
		if o.ListenAny {
			return catalog.Usage.New("--listen-any needs --listen ADDR")
		}
		return nil
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return catalog.Usage.New("--listen %q: want HOST:PORT, like 127.0.0.1:8765", o.Listen)
	}
	if !o.ListenAny && !loopbackHost(host) {
		return notLoopback(o.Listen)
	}
	return nil
}

func notLoopback(addr string) error {
	return catalog.Usage.New("--listen %s is not a loopback address: whoever reaches the MCP server can start runs, "+
		"which run agents with your model keys and write branches into your repositories", addr).
		WithFix("listen on 127.0.0.1:PORT or [::1]:PORT, or pass --listen-any to serve other addresses " +
			"(with your own authentication in front: the server has none)")
}

// loopbackHost reports whether host names only this machine.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (app *App) newMCPCmd() *cobra.Command {
	o := &mcpOptions{}
	c := &cobra.Command{
		Use:   "mcp [--listen ADDR [--listen-any]]",
		Short: "Serve agentrun to orchestrating agents over MCP (Model Context Protocol)",
		Long: `Serve agentrun over the Model Context Protocol, for an orchestrating agent
that submits tasks, follows them and reviews their patches.

Tools: submit, list, status, logs, result, diff, cancel, resume, verdict and
egress. Each takes the flags of the command of the same name as typed input
(the task of submit as its text) and returns that command's --json document
(docs/json); an error is a tool error carrying the error catalog's
{"error": {...}}. logs with follow: true returns only what is new since a
cursor (the journal's event seq, the agent log's offset), for polling;
submit and resume with wait: true return when the run has ended, sending a
progress notification for each journal event meanwhile.
Resources: agentrun://runs/{id}/patch (the patch) and
agentrun://runs/{id}/attempts/{n}/transcript (an attempt's transcript).

By default one client is served on stdin and stdout (the stdio transport),
until stdin closes: that is how MCP clients start a server. A client's
configuration (Claude Code's .mcp.json, and most others):

  {"mcpServers": {"agentrun": {"command": "agentrun", "args": ["mcp"]}}}

--listen ADDR serves streamable HTTP on ADDR instead (port 0 picks a free
one; the address is printed on stderr) until SIGINT or SIGTERM. It must be
a loopback address unless --listen-any: the server has no authentication,
and whoever reaches it can start runs with your keys.

The server runs with this process's environment and data directory
(AGENTRUN_HOME, config.toml, the model keys); a relative repo is resolved
against its working directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return app.runMCP(cmd.Context(), o)
		},
	}
	c.Flags().StringVar(&o.Listen, "listen", "", "serve streamable HTTP on this `ADDR` (HOST:PORT, loopback) instead of stdio")
	c.Flags().BoolVar(&o.ListenAny, "listen-any", false, "allow a --listen address that is not loopback")
	c.AddCommand(app.newMCPTailCmd())
	return c
}

func (app *App) runMCP(ctx context.Context, o *mcpOptions) error {
	srv := mcp.New(mcp.Options{Exec: app.mcpExec, Version: buildVersion().Version})
	if o.Listen == "" {
		return srv.ServeStdio(ctx, io.NopCloser(app.Stdin), nopWriteCloser{app.Stdout})
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return catalog.Usage.Wrap(err, "--listen %s: %v", o.Listen, err).WithFix("pick a free port (0 picks one)")
	}
	// "localhost" may resolve to anything: what counts is the address bound.
	if a, ok := ln.Addr().(*net.TCPAddr); ok && !o.ListenAny && !a.IP.IsLoopback() {
		ln.Close()
		return notLoopback(ln.Addr().String())
	}
	fmt.Fprintf(app.Stderr, "agentrun mcp: serving streamable HTTP on http://%s/\n", ln.Addr())
	return srv.ServeHTTP(ctx, ln)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpRunnable are the command lines the MCP server may run: the tools'
// commands and the hidden tail, nothing else (not mcp itself).
var mcpRunnable = map[string]bool{"submit": true, "list": true, "status": true, "logs": true, "result": true,
	"diff": true, "cancel": true, "resume": true, "verdict": true, "egress": true, "mcp tail": true}

// mcpExec runs one command line for the MCP server in process (inProcess).
func (app *App) mcpExec(ctx context.Context, args []string, stdin io.Reader) (stdout, stderr []byte, exit int) {
	var out, errb bytes.Buffer
	sub := &App{Stdin: stdin, Stdout: &out, Stderr: &errb, Getenv: app.Getenv, Executable: app.Executable, Deps: app.Deps, local: true}
	return inProcess(ctx, sub, &out, &errb, args, mcpRunnable, "the MCP server")
}

// inProcess runs one command line in process for a server (who names it):
// sub is a fresh App with the same dependencies and environment, its
// streams the buffers out and errb, so concurrent calls share nothing but
// the data directory. Only the command lines in allowed run. A panic in a
// command is an internal error of that call, not the server's end.
func inProcess(ctx context.Context, sub *App, out, errb *bytes.Buffer, args []string, allowed map[string]bool, who string) (stdout, stderr []byte, exit int) {
	name := ""
	if len(args) > 0 {
		name = args[0]
		if name == "mcp" && len(args) > 1 {
			name += " " + args[1]
		}
	}
	defer func() {
		if p := recover(); p != nil {
			out.Reset()
			sub.JSON, sub.ndjson = true, false
			exit = sub.renderError(ctx, catalog.Internal.New("agentrun %s: panic: %v", name, p))
			stdout, stderr = out.Bytes(), errb.Bytes()
		}
	}()
	if !allowed[name] {
		sub.JSON = true
		exit = sub.renderError(ctx, catalog.Internal.New("%s runs no command %q", who, name))
		return out.Bytes(), errb.Bytes(), exit
	}
	if sub.Stdin == nil {
		sub.Stdin = strings.NewReader("")
	}
	sub.only, _, _ = strings.Cut(name, " ")
	exit = sub.Execute(ctx, args)
	return out.Bytes(), errb.Bytes(), exit
}
