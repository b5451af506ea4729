package cli

// accounts.go: the commands about the team server's users, tokens and
// quotas (users, tokens, quota). They always talk to a server: --server
// (or AGENTRUN_SERVER), else the latest 'agentrun login'.

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/users"
)

// The server's documents (docs/json: users, user, tokens, token, quota).
type (
	usersDoc  = server.UsersDoc
	userDoc   = server.UserDoc
	tokensDoc = server.TokensDoc
	tokenDoc  = server.TokenDoc
	tokenItem = users.Token
	quotaDoc  = server.QuotaDoc
)

// accountCommands are the top-level commands of the server's accounts.
var accountCommands = map[string]bool{"users": true, "tokens": true, "quota": true, "login": true, "logout": true}

// topCommand is the command under the root that c is or is under.
func topCommand(c *cobra.Command) string {
	for c.HasParent() && c.Parent().HasParent() {
		c = c.Parent()
	}
	return c.Name()
}

// connectAccount connects an accounts command to its server (login and
// logout find theirs themselves).
func (app *App) connectAccount(c *cobra.Command, top string) error {
	if top == "login" || top == "logout" || !c.Runnable() {
		return nil
	}
	u := app.serverURL
	if u == "" {
		u = app.Getenv("AGENTRUN_SERVER")
	}
	tf := app.serverToken
	if tf == "" {
		tf = app.Getenv("AGENTRUN_SERVER_TOKEN_FILE")
	}
	token, err := readToken(tf)
	if err != nil {
		return err
	}
	if l, ok := storedLogin(app.Getenv, u); ok && tf == "" {
		u, token = l.Server, l.Token
	}
	if u == "" {
		return catalog.NotLoggedIn.New("agentrun %s needs a team server", c.CommandPath()[len("agentrun "):])
	}
	cl, err := client.New(u, token)
	if err != nil {
		return err
	}
	cl.Warn = func(msg string) { app.warn("%s", msg) }
	app.remote = cl
	return nil
}

// show prints a server's answer: as it came with --json, else as text.
func show[T any](app *App, doc []byte, err error, text func(*T) error) error {
	var v T
	return answer(app, doc, err, &v, text)
}

func (app *App) newUsersCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "users list|add|disable|enable|quota",
		Short: "Manage the team server's users (admins)",
		Long: `Manage the users of a team server: list them, add one (with a role: admin,
member or viewer; its first token is printed once), disable or enable one
(a disabled user's tokens are refused), and set one's quotas over the
server's defaults. Needs an admin's token with the admin scope.`,
	}
	list := &cobra.Command{Use: "list", Short: "List the users", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := app.remote.Get(cmd.Context(), "/v1/users", nil)
			return show(app, doc, err, func(v *usersDoc) error {
				t := table{header: []string{"NAME", "ROLE", "STATUS", "ID", "CREATED"}, colour: app.colour()}
				for _, u := range v.Users {
					st := "active"
					if u.Disabled {
						st = "disabled"
					}
					t.add(u.Name, string(u.Role), st, u.ID, u.CreatedAt.Format("2006-01-02"))
				}
				return t.write(app.Stdout)
			})
		}}
	var role string
	add := &cobra.Command{Use: "add NAME [--role member]", Short: "Add a user and print its first token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := app.remote.Post(cmd.Context(), "/v1/users", map[string]string{"name": args[0], "role": role})
			return show(app, doc, err, func(v *userDoc) error { return app.printNewUser(v) })
		}}
	add.Flags().StringVar(&role, "role", "member", "the user's `ROLE`: admin, member or viewer")
	c.AddCommand(list, add, app.userStateCmd("disable"), app.userStateCmd("enable"), app.newUserQuotaCmd())
	return c
}

func (app *App) printNewUser(v *userDoc) error {
	fmt.Fprintf(app.Stdout, "user %s (%s) added, id %s\n", v.User.Name, v.User.Role, v.User.ID)
	if v.Secret != "" {
		fmt.Fprintf(app.Stdout, "first token (shown once; it expires %s):\n%s\n", v.Token.ExpiresAt.Format("2006-01-02"), v.Secret)
	}
	return nil
}

func (app *App) userStateCmd(verb string) *cobra.Command {
	return &cobra.Command{Use: verb + " NAME", Short: strings.ToUpper(verb[:1]) + verb[1:] + " a user", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := app.remote.Post(cmd.Context(), "/v1/users/"+url.PathEscape(args[0])+"/"+verb, nil)
			return show(app, doc, err, func(v *userDoc) error {
				fmt.Fprintf(app.Stdout, "user %s %sd\n", v.User.Name, verb)
				return nil
			})
		}}
}

func (app *App) newUserQuotaCmd() *cobra.Command {
	ints := map[string]*int64{}
	floats := map[string]*float64{}
	var timeout string
	c := &cobra.Command{Use: "quota NAME [--concurrent-runs N] [--runs-per-day N] ...",
		Short: "Set a user's quotas (replacing the user's earlier overrides; unset flags: the server's defaults, 0: no limit)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			for k, v := range ints {
				if cmd.Flags().Changed(strings.ReplaceAll(k, "_", "-")) {
					body[k] = *v
				}
			}
			for k, v := range floats {
				if cmd.Flags().Changed(strings.ReplaceAll(k, "_", "-")) {
					body[k] = *v
				}
			}
			if cmd.Flags().Changed("max-timeout") {
				if _, err := time.ParseDuration(timeout); err != nil {
					return catalog.BadDuration.New("--max-timeout %q", timeout)
				}
				body["max_timeout"] = timeout
			}
			doc, err := app.remote.Post(cmd.Context(), "/v1/users/"+url.PathEscape(args[0])+"/limits", body)
			return show(app, doc, err, func(v *userDoc) error {
				fmt.Fprintf(app.Stdout, "quotas of %s set\n", v.User.Name)
				return nil
			})
		}}
	f := c.Flags()
	for _, k := range []string{"concurrent_runs", "runs_per_day", "tokens_per_day", "tokens_per_month", "max_attempts", "max_tokens"} {
		ints[k] = f.Int64(strings.ReplaceAll(k, "_", "-"), 0, strings.ReplaceAll(k, "_", " ")+" (`N`, 0: no limit)")
	}
	for _, k := range []string{"cost_per_day", "cost_per_month", "max_cost"} {
		floats[k] = f.Float64(strings.ReplaceAll(k, "_", "-"), 0, strings.ReplaceAll(k, "_", " ")+" (US `DOLLARS`, 0: no limit)")
	}
	f.StringVar(&timeout, "max-timeout", "", "the longest --timeout a run may have (`DURATION`, 0: no limit)")
	return c
}

func (app *App) newTokensCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "tokens list|create|revoke",
		Short: "Manage your personal API tokens on the team server",
		Long: `Manage personal API tokens (agr_...): list yours (--all: everyone's, for
admins), create one (its secret is printed once: keep it; the server
keeps only its hash), revoke one. A token's scopes (runs:read,
runs:write, admin) narrow what its user's role allows; a new token never
has a scope the token that makes it lacks.`,
	}
	var all bool
	list := &cobra.Command{Use: "list [--all]", Short: "List tokens", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if all {
				q.Set("all", "true")
			}
			doc, err := app.remote.Get(cmd.Context(), "/v1/tokens", q)
			return show(app, doc, err, func(v *tokensDoc) error {
				t := table{header: []string{"ID", "USER", "NAME", "HINT", "SCOPES", "EXPIRES", "LAST USED", "STATE"}, colour: app.colour()}
				now := time.Now()
				for _, tk := range v.Tokens {
					t.add(tk.ID, tk.User, tk.Name, tk.Hint+"…", strings.Join(tk.Scopes, ","), dateOr(tk.ExpiresAt, "never"), dateOr(tk.LastUsedAt, "never"), tokenState(tk, now))
				}
				return t.write(app.Stdout)
			})
		}}
	list.Flags().BoolVar(&all, "all", false, "every user's tokens (admins)")
	var scopes []string
	var expires, user string
	create := &cobra.Command{Use: "create NAME [--scope S]... [--expires 720h]", Short: "Create a token and print it once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"name": args[0], "scopes": scopes, "expires_in": expires, "user": user}
			doc, err := app.remote.Post(cmd.Context(), "/v1/tokens", body)
			return show(app, doc, err, func(v *tokenDoc) error {
				fmt.Fprintf(app.Stdout, "token %s (%s, %s) for %s, expires %s; shown once:\n%s\n",
					v.Token.ID, v.Token.Name, strings.Join(v.Token.Scopes, ","), v.Token.User, dateOr(v.Token.ExpiresAt, "never"), v.Secret)
				return nil
			})
		}}
	create.Flags().StringSliceVar(&scopes, "scope", nil, "a `SCOPE`: runs:read, runs:write, admin (repeatable; default: those of the token used)")
	create.Flags().StringVar(&expires, "expires", "", "expire after this `DURATION` (default 2160h, 90 days; 0: never)")
	create.Flags().StringVar(&user, "user", "", "make the token for this `USER` (admins)")
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke a token", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := app.remote.Post(cmd.Context(), "/v1/tokens/"+url.PathEscape(args[0])+"/revoke", nil)
			return show(app, doc, err, func(v *tokenDoc) error {
				fmt.Fprintf(app.Stdout, "token %s (%s) revoked\n", v.Token.ID, v.Token.Name)
				return nil
			})
		}}
	c.AddCommand(list, create, revoke)
	return c
}

func dateOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Format("2006-01-02 15:04")
}

func tokenState(t tokenItem, now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return "expired"
	}
	return "valid"
}

func (app *App) newQuotaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "quota",
		Short: "Show your quotas and usage on the team server",
		Long: `Show the caller's quotas on the team server (the server's defaults with
the admin's overrides) and what counts against them now: active runs,
runs today, tokens and cost today and this month (UTC), including what
active runs may still spend of their budgets, and when the periods reset.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return app.runQuota(cmd.Context()) },
	}
}

func (app *App) runQuota(ctx context.Context) error {
	doc, err := app.remote.Get(ctx, "/v1/quota", nil)
	return show(app, doc, err, func(v *quotaDoc) error {
		l, u := v.Limits, v.Usage
		lim := func(n *int64) string {
			if n == nil || *n == 0 {
				return "no limit"
			}
			return fmt.Sprint(*n)
		}
		limF := func(n *float64) string {
			if n == nil || *n == 0 {
				return "no limit"
			}
			return fmt.Sprintf("$%g", *n)
		}
		var f fields
		f.add("user", v.User)
		f.add("concurrent runs", fmt.Sprintf("%d of %s", u.ConcurrentRuns, lim(l.ConcurrentRuns)))
		f.add("runs today", fmt.Sprintf("%d of %s", u.RunsToday, lim(l.RunsPerDay)))
		f.add("tokens today", fmt.Sprintf("%d of %s", u.TokensToday, lim(l.TokensPerDay)))
		f.add("tokens this month", fmt.Sprintf("%d of %s", u.TokensMonth, lim(l.TokensPerMonth)))
		f.add("cost today", fmt.Sprintf("$%.4f of %s", u.CostToday, limF(l.CostPerDay)))
		f.add("cost this month", fmt.Sprintf("$%.4f of %s", u.CostMonth, limF(l.CostPerMonth)))
		f.add("reserved", fmt.Sprintf("%d tokens, $%.4f (the active runs' unspent budgets)", u.ReservedTokens, u.ReservedCost))
		per := "no limit"
		if l.MaxTimeout != nil && *l.MaxTimeout > 0 {
			per = "timeout " + l.MaxTimeout.String()
		} else {
			per = "timeout " + per
		}
		per += ", attempts " + lim(l.MaxAttempts) + ", tokens " + lim(l.MaxTokens) + ", cost " + limF(l.MaxCost)
		f.add("per run", per)
		f.add("resets", fmt.Sprintf("day at %s, month at %s", v.DayResets.Format(time.RFC3339), v.MonthResets.Format(time.RFC3339)))
		return f.write(app.Stdout)
	})
}
