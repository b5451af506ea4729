package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/agent"
	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/run"
)

// idCommands take a run ID as their first argument.
var idCommands = map[string]bool{"status": true, "logs": true, "cancel": true, "result": true, "diff": true,
	"resume": true, "clean": true, "verdict": true, "egress": true}

// addCompletions registers shell completions: run ids (newest first) for
// the commands that take one, verdict values, and the values of the flags
// that name a profile, a backend, a state, a network, workspace or history mode.
func (app *App) addCompletions(root *cobra.Command) {
	for _, c := range root.Commands() {
		if idCommands[c.Name()] && c.ValidArgsFunction == nil {
			name := c.Name()
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
				switch {
				case len(args) == 0:
					return app.completeRunIDs(cmd.Context(), prefix), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
				case len(args) == 1 && name == "verdict":
					return []cobra.Completion{"accept", "reject"}, cobra.ShellCompDirectiveNoFileComp
				}
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
		}
		fixed := func(flag string, values ...string) {
			if c.Flags().Lookup(flag) != nil {
				_ = c.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
			}
		}
		fixed("agent", append(app.Deps.Agents.Names(), agent.BuiltinName)...)
		fixed("sandbox", app.Deps.backendNames()...)
		fixed("network", "none", "allowlist")
		fixed("provider", "openai", "anthropic")
		fixed("workspace", run.WorkspaceAuto, run.WorkspaceCopy, run.WorkspaceOverlay)
		fixed("history", run.HistoryShallow, run.HistoryFull)
		if c.Name() == "list" {
			var states []string
			for _, s := range run.States {
				states = append(states, string(s))
			}
			fixed("status", states...)
			fixed("verdict", "accept", "reject", "none")
		}
	}
}

// completeRunIDs lists the runs whose id starts with prefix, newest first,
// each with the start of its task as the description.
func (app *App) completeRunIDs(ctx context.Context, prefix string) []cobra.Completion {
	env, err := app.openEnv()
	if err != nil {
		return nil
	}
	runs, _, err := env.Store.List(ctx, run.Filter{})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, r := range runs {
		if strings.HasPrefix(r.ID, prefix) {
			out = append(out, cobra.CompletionWithDesc(r.ID, string(r.State)+": "+oneLine(r.Task, 50)))
		}
	}
	return out
}

func (app *App) newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write the man pages (agentrun.1, agentrun-submit.1, ...) into DIR",
		Long: `Write a man page for agentrun and each of its commands into DIR, generated
from the commands' own help. Install them, e.g.:

  agentrun man ~/.local/share/man/man1 && man agentrun-submit`,
		Args: exactArgs(1, "man needs the directory to write the pages into"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return catalog.Usage.Wrap(err, "man %s: %v", dir, err).WithFix("name a directory you can write")
			}
			pages, err := writeManPages(cmd.Root(), dir, "agentrun "+buildVersion().Version)
			if err != nil {
				return fmt.Errorf("write man pages: %w", err)
			}
			if app.JSON {
				return writeJSON(app.Stdout, map[string]any{"dir": dir, "pages": pages})
			}
			_, err = fmt.Fprintf(app.Stdout, "wrote %d man pages to %s\n", len(pages), dir)
			return err
		},
	}
}
