package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/config"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/users"
)

// serverUsers readies the server's users: the built-in admin the
// requests come as (the bootstrap one with --token-file, the local one
// without), and the default quotas from config.toml's [quota].
func serverUsers(ctx context.Context, be *server.Backend, token string, s config.Settings) (users.Limits, error) {
	if be.Users != nil {
		id := users.LocalID
		if token != "" {
			id = users.BootstrapID
		}
		if err := be.Users.EnsureBuiltin(ctx, id); err != nil {
			return users.Limits{}, catalog.Home.Wrap(err, "the server's users: %v", err)
		}
	}
	return quotaDefaults(s.File.Quota, s.Path)
}

// quotaDefaults are the [quota] table as limits (0: not set).
func quotaDefaults(q config.Quota, path string) (users.Limits, error) {
	var l users.Limits
	i := func(n int64) *int64 {
		if n <= 0 {
			return nil
		}
		return &n
	}
	f := func(n float64) *float64 {
		if n <= 0 {
			return nil
		}
		return &n
	}
	l.ConcurrentRuns, l.RunsPerDay, l.TokensPerDay, l.TokensPerMonth = i(q.ConcurrentRuns), i(q.RunsPerDay), i(q.TokensPerDay), i(q.TokensPerMonth)
	l.CostPerDay, l.CostPerMonth, l.MaxCost = f(q.CostPerDay), f(q.CostPerMonth), f(q.MaxCost)
	l.MaxAttempts, l.MaxTokens = i(q.MaxAttempts), i(q.MaxTokens)
	if q.MaxTimeout != "" {
		d, err := time.ParseDuration(q.MaxTimeout)
		if err != nil || d < 0 {
			return l, catalog.BadConfig.New("%s: quota.max_timeout = %q: want a duration like 2h", path, q.MaxTimeout)
		}
		if d > 0 {
			rd := run.Duration(d)
			l.MaxTimeout = &rd
		}
	}
	return l, nil
}

// newServerUsersCmd is 'agentrun server users add': on the server's host,
// against its database, to make the first users (and their first
// tokens) before anyone can call the API.
func (app *App) newServerUsersCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "users add NAME [--role member] [--data DIR] [--database-url URL]",
		Short: "Add a user to the team server's database, on its host",
		Long: `Add a user to the team server's database directly, on the server's host
(the same --data and --database-url as 'agentrun server'), and print its
first token (shown once; the database keeps only its hash). Use it for
the first admin; later ones can be added over the API ('agentrun users
add'). The server's --token-file token is the bootstrap admin as well.`,
	}
	o := &serverOptions{}
	var role string
	add := &cobra.Command{Use: "add NAME", Short: "Add a user and print its first token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.runServerUserAdd(cmd.Context(), o, args[0], users.Role(role))
		}}
	add.Flags().StringVar(&role, "role", "member", "the user's `ROLE`: admin, member or viewer")
	add.Flags().StringVar(&o.Data, "data", "", "the server's data `DIR` (default: the data directory's server/)")
	add.Flags().StringVar(&o.DatabaseURL, "database-url", "", "the database `URL`: postgres://... (or sqlite:PATH)")
	c.AddCommand(add)
	return c
}

func (app *App) runServerUserAdd(ctx context.Context, o *serverOptions, name string, role users.Role) error {
	if app.Deps.OpenServer == nil {
		return catalog.Internal.New("this build has no team server")
	}
	url := o.DatabaseURL
	if url == "" {
		data, err := app.serverData(o)
		if err != nil {
			return err
		}
		url = "sqlite:" + filepath.Join(data, "agentrun.db")
	}
	be, err := app.Deps.OpenServer(ctx, url, server.BackendOptions{})
	if err != nil {
		return catalog.Home.Wrap(err, "the server's database: %v", err).WithFix("check --data or --database-url and that the database is reachable")
	}
	defer be.Close()
	doc, err := server.AddUser(ctx, be.Users, name, role)
	if err != nil {
		return err
	}
	if app.JSON {
		return writeJSON(app.Stdout, doc)
	}
	if err := app.printNewUser(doc); err != nil {
		return err
	}
	fmt.Fprintf(app.Stderr, "log in with: agentrun login --server URL  (the token on stdin)\n")
	return nil
}
