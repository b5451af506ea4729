package cli

// login.go: agentrun login and logout, and the logins they keep: a team
// server's URL and a personal token, in the user's config directory
// (logins.json, mode 0600). A later command whose --server (or
// AGENTRUN_SERVER) names that server sends that token unless
// --token-file says otherwise.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrun/agentrun/internal/catalog"
	"github.com/agentrun/agentrun/internal/client"
	"github.com/agentrun/agentrun/internal/server"
)

// login is one stored login.
type login struct {
	Server string    `json:"server"`
	Token  string    `json:"token"`
	User   string    `json:"user"`
	At     time.Time `json:"logged_in_at"`
}

type loginFile struct {
	// Logins, the latest last.
	Logins []login `json:"logins"`
}

// loginsPath is the logins' file, beside config.toml.
func loginsPath(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		dir = filepath.Join(getenv("HOME"), ".config")
	}
	return filepath.Join(dir, "agentrun", "logins.json")
}

// normURL is a server URL as logins compare it.
func normURL(u string) string { return strings.TrimSuffix(strings.TrimSpace(u), "/") }

func readLogins(getenv func(string) string) (loginFile, error) {
	var lf loginFile
	p := loginsPath(getenv)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return lf, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &lf)
	}
	if err != nil {
		return lf, catalog.BadConfig.Wrap(err, "%s: %v", p, err).WithFix("remove %s and log in again", p)
	}
	return lf, nil
}

// writeLogins replaces the file whole (temp file, 0600, rename): a token
// is never readable by others, not even half written.
func writeLogins(getenv func(string) string, lf loginFile) error {
	p := loginsPath(getenv)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return catalog.BadConfig.Wrap(err, "%v", err)
	}
	b, err := json.MarshalIndent(lf, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".logins-*")
	if err != nil {
		return catalog.BadConfig.Wrap(err, "%v", err)
	}
	defer os.Remove(tmp.Name())
	if err = tmp.Chmod(0o600); err == nil {
		if _, err = tmp.Write(append(b, '\n')); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		return catalog.BadConfig.Wrap(err, "%s: %v", p, err)
	}
	return nil
}

// storedLogin is the login for server u ("": the latest login).
func storedLogin(getenv func(string) string, u string) (login, bool) {
	lf, err := readLogins(getenv)
	if err != nil {
		return login{}, false
	}
	for i := len(lf.Logins) - 1; i >= 0; i-- {
		if l := lf.Logins[i]; u == "" || normURL(l.Server) == normURL(u) {
			return l, true
		}
	}
	return login{}, false
}

type loginOutput struct {
	Server string       `json:"server"`
	Me     server.MeDoc `json:"me"`
	Stored string       `json:"stored"`
}

func (app *App) newLoginCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "login --server URL [--token-file FILE]",
		Short: "Log in to a team server with a personal API token",
		Long: `Log in to a team server: read a personal API token (agr_...) from
--token-file FILE or from stdin, check it against the server (GET /v1/me),
and keep the server's URL and the token in the config directory
($XDG_CONFIG_HOME/agentrun/logins.json, readable by you only). Later
commands whose --server or AGENTRUN_SERVER names this server send that
token; users, tokens and quota use the latest login without --server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return app.runLogin(cmd.Context()) },
	}
}

func (app *App) runLogin(ctx context.Context) error {
	u := app.serverURL
	if u == "" {
		u = app.Getenv("AGENTRUN_SERVER")
	}
	if u == "" {
		return catalog.Usage.New("login needs the server").WithFix("agentrun login --server URL (the token on stdin or in --token-file FILE)")
	}
	var token string
	var err error
	if tf := app.serverToken; tf != "" {
		token, err = readToken(tf)
	} else {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(app.Stdin, 4096))
		token = strings.TrimSpace(string(b))
		if err == nil && (token == "" || strings.ContainsAny(token, " \t\r\n")) {
			err = catalog.Usage.New("no token on stdin").WithFix("pipe the token in (agentrun login --server URL < token.txt) or give --token-file FILE")
		}
	}
	if err != nil {
		return usageErr(err)
	}
	cl, err := client.New(u, token)
	if err != nil {
		return err
	}
	doc, err := cl.Get(ctx, "/v1/me", nil)
	if err != nil {
		return err
	}
	var out loginOutput
	if err := decodeDoc(doc, &out.Me); err != nil {
		return err
	}
	lf, err := readLogins(app.Getenv)
	if err != nil {
		return err
	}
	kept := lf.Logins[:0]
	for _, l := range lf.Logins {
		if normURL(l.Server) != normURL(u) {
			kept = append(kept, l)
		}
	}
	lf.Logins = append(kept, login{Server: normURL(u), Token: token, User: out.Me.User.Name, At: time.Now().UTC()})
	if err := writeLogins(app.Getenv, lf); err != nil {
		return err
	}
	out.Server, out.Stored = normURL(u), loginsPath(app.Getenv)
	if app.JSON {
		return writeJSON(app.Stdout, out)
	}
	fmt.Fprintf(app.Stdout, "logged in to %s as %s (%s)\n", out.Server, out.Me.User.Name, out.Me.User.Role)
	return nil
}

type logoutOutput struct {
	Server  string `json:"server"`
	Removed bool   `json:"removed"`
}

func (app *App) newLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout [--server URL]",
		Short: "Forget the login to a team server",
		Long: `Forget the token kept by 'agentrun login' for the server (--server,
AGENTRUN_SERVER, or the latest login). The token stays valid on the
server: revoke it with 'agentrun tokens revoke ID' first if it should not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u := app.serverURL
			if u == "" {
				u = app.Getenv("AGENTRUN_SERVER")
			}
			if l, ok := storedLogin(app.Getenv, u); ok {
				u = l.Server
			}
			lf, err := readLogins(app.Getenv)
			if err != nil {
				return err
			}
			out := logoutOutput{Server: normURL(u)}
			kept := lf.Logins[:0]
			for _, l := range lf.Logins {
				if normURL(l.Server) == out.Server {
					out.Removed = true
					continue
				}
				kept = append(kept, l)
			}
			lf.Logins = kept
			if out.Removed {
				if err := writeLogins(app.Getenv, lf); err != nil {
					return err
				}
			}
			if app.JSON {
				return writeJSON(app.Stdout, out)
			}
			if !out.Removed {
				fmt.Fprintln(app.Stdout, "not logged in")
				return nil
			}
			fmt.Fprintf(app.Stdout, "logged out of %s\n", out.Server)
			return nil
		},
	}
}
