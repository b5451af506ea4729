package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
)

// App is what every command shares: streams, output mode, data directory.
type App struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	JSON   bool
	// Getenv reads the environment (tests replace it).
	Getenv func(string) string
	// Executable is the agentrun binary that sandboxes run inside (default:
	// this process's own; tests name a built binary).
	Executable string
	// quiet: submit -q prints only the run id.
	quiet bool
	// changes, when set, fires when the supervisor of the run a submit
	// waits for changes its state (supervisor.Pending.Changes).
	changes <-chan struct{}
	// ndjson: the command streams JSON lines (--json with --follow), so
	// an error is one more compact line, not an indented document.
	ndjson bool
	// serverURL and serverToken are --server and --token-file; remote is
	// the team server the run commands go to (nil: this machine's runs).
	// local: the command runs in process for a server or an MCP server,
	// never against another server.
	serverURL, serverToken string
	remote                 *client.Client
	local                  bool
	// only, when set, is the one top-level command the tree holds (a
	// command run in process; see inProcess).
	only string
	// Deps are the implementations, chosen by the wiring.
	Deps Deps
	// home is resolved lazily from --home/AGENTRUN_HOME/config.
	env *Env
}

// exitStatus is appended to every command's long help.
const exitStatus = `
EXIT STATUS
  0    success
  1    the run ended other than succeeded (submit --wait, resume --wait)
  2    usage, preflight or environment error (disk full, damaged run
       record); nothing was created
  3    run not found (or the id prefix is ambiguous)
  70   internal error
  130  interrupted (Ctrl-C)`

// Main runs the CLI and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, deps Deps) int {
	app := &App{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv, Deps: deps}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return app.Execute(ctx, args)
}

// Execute runs one command line against app.
func (app *App) Execute(ctx context.Context, args []string) int {
	root := app.newRootCmd()
	root.SetArgs(args)
	root.SetIn(app.Stdin)
	root.SetOut(app.Stdout)
	root.SetErr(app.Stderr)
	// --json governs how errors are printed, including errors found before
	// flags are parsed (an unknown command or flag).
	follow := false
	for _, a := range args {
		if a == "--" {
			break
		}
		switch a {
		case "--json", "--json=true":
			app.JSON = true
		case "--follow", "--follow=true", "-f":
			follow = true
		}
	}
	// A stream's error is one JSON line, also when it is a flag error
	// found before the command runs.
	app.ndjson = app.JSON && follow
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if _, ok := catalog.As(err); !ok && isCobraUsage(err) {
		err = catalog.Usage.Wrap(err, "%v", err).WithFix("run 'agentrun --help' for the commands, or 'agentrun COMMAND --help' for a command's flags")
	}
	return app.renderError(ctx, err)
}

// isCobraUsage reports the errors cobra makes of a command line it cannot
// take: an unknown command, a bad argument count.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command ", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument "} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return true
		}
	}
	return false
}

func (app *App) newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentrun",
		Short: "Run coding-agent tasks as isolated, recoverable jobs",
		Long: `agentrun runs a coding agent on its own copy of a repository inside a sandbox,
checks the result, and hands back a branch agentrun/<id> and a patch to review.

With --server URL (or AGENTRUN_SERVER) the run commands (submit, list, status,
logs, diff, result, cancel, resume, verdict, egress) go to a team server
('agentrun server'), with the same flags and --json documents; --token-file
FILE (or AGENTRUN_SERVER_TOKEN_FILE) holds its token.
` + exitStatus,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildVersion().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().BoolVar(&app.JSON, "json", false, "print one JSON document on stdout (errors too)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr(err) })
	app.addRemoteFlags(root)
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		f := c.Flags().Lookup("follow")
		app.ndjson = app.JSON && f != nil && f.Value.String() == "true"
		return app.connect(c)
	}
	for _, nc := range []struct {
		name string
		make func() *cobra.Command
	}{
		{"submit", app.newSubmitCmd},
		{"list", app.newListCmd},
		{"status", app.newStatusCmd},
		{"logs", app.newLogsCmd},
		{"cancel", app.newCancelCmd},
		{"result", app.newResultCmd},
		{"diff", app.newDiffCmd},
		{"resume", app.newResumeCmd},
		{"clean", app.newCleanCmd},
		{"gc", app.newGCCmd},
		{"setup", app.newSetupCmd},
		{"verdict", app.newVerdictCmd},
		{"egress", app.newEgressCmd},
		{"version", app.newVersionCmd},
		{"doctor", app.newDoctorCmd},
		{"man", app.newManCmd},
		{"config", app.newConfigCmd},
		{"policy", app.newPolicyCmd},
		{"mcp", app.newMCPCmd},
		{"server", app.newServerCmd},
		{"audit", app.newAuditCmd},
		{"worker", app.newWorkerCmd},
		{"bench", app.newBenchCmd},
		{"login", app.newLoginCmd},
		{"logout", app.newLogoutCmd},
		{"users", app.newUsersCmd},
		{"tokens", app.newTokensCmd},
		{"quota", app.newQuotaCmd},
	} {
		if app.only != "" && nc.name != app.only {
			// A command run in process builds only itself: the tree of
			// every command is most of what a request would allocate.
			continue
		}
		c := nc.make()
		if !strings.Contains(c.Long, "\nEXIT STATUS\n") { // (bench has its own)
			c.Long = c.Long + "\n" + exitStatus
		}
		if c.Args == nil {
			c.Args = cobra.ArbitraryArgs
		}
		root.AddCommand(c)
	}
	if !app.local {
		// Not for a command run in process (a server's, an MCP
		// server's, one per request): no shell completes it, and cobra
		// keeps flag completions in a map of its own, for the process's
		// life, keyed by the flag, so each of those commands' trees
		// would stay in memory.
		app.addCompletions(root)
	}
	return root
}
