package cli

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/wire"
)

// TestAccountsCommands: the first admin is made on the server's host
// against its database; login keeps the token (0600) and later commands
// use it: users, tokens and quota print their documents; logout forgets
// the login.
func TestAccountsCommands(t *testing.T) {
	h := newTestHome(t)
	h.env["XDG_CONFIG_HOME"] = t.TempDir()
	data := t.TempDir()
	deps := testDeps
	deps.OpenServer = wire.OpenServer
	run := func(stdin string, args ...string) (int, string, string) {
		t.Helper()
		app, out, errb := h.app()
		app.Deps, app.Stdin = deps, strings.NewReader(stdin)
		code := app.Execute(context.Background(), args)
		return code, out.String(), errb.String()
	}
	ok := func(stdin string, args ...string) string {
		t.Helper()
		code, out, errb := run(stdin, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errb)
		}
		return out
	}
	d := validDoc(t, "user.schema.json", "server users add", ok("", "server", "users", "add", "ada", "--role", "admin", "--data", data, "--json"))
	secret, _ := d["secret"].(string)
	if !strings.HasPrefix(secret, "agr_") {
		t.Fatalf("no first token: %v", d)
	}

	be, err := wire.OpenServer(context.Background(), "sqlite:"+filepath.Join(data, "agentrun.db"), server.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	list := func(context.Context, []string, io.Reader) ([]byte, []byte, int) {
		return []byte(`{"runs":[],"broken":[]}`), nil, 0
	}
	srv := server.New(server.Options{Exec: list, Token: "bootstrap-secret", Users: be.Users, Store: be.Store})
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	if code, out, _ := run("", "quota", "--json"); code != 2 || !strings.Contains(out, "not_logged_in") {
		t.Fatalf("quota before login: %d %s", code, out)
	}
	validDoc(t, "login.schema.json", "login", ok(secret+"\n", "login", "--server", hs.URL, "--json"))
	fi, err := os.Stat(loginsPath(h.env2()))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("logins file: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(loginsPath(h.env2())); !strings.Contains(string(b), secret) {
		t.Fatalf("the token is not kept: %s", b)
	}
	if code, out, _ := run("agr_wrong\n", "login", "--server", hs.URL, "--json"); code != 2 || !strings.Contains(out, "unauthorized") {
		t.Errorf("login with a wrong token: %d %s", code, out)
	}

	d = validDoc(t, "user.schema.json", "users add", ok("", "users", "add", "bob", "--role", "member", "--json"))
	if d["user"].(map[string]any)["role"] != "member" {
		t.Errorf("users add: %v", d)
	}
	validDoc(t, "users.schema.json", "users list", ok("", "users", "list", "--json"))
	if out := ok("", "users", "list"); !strings.Contains(out, "bob") || !strings.Contains(out, "member") {
		t.Errorf("users list: %s", out)
	}
	validDoc(t, "user.schema.json", "users quota", ok("", "users", "quota", "bob", "--concurrent-runs", "2", "--max-timeout", "1h", "--cost-per-day", "1.5", "--json"))
	validDoc(t, "user.schema.json", "users disable", ok("", "users", "disable", "bob", "--json"))
	d = validDoc(t, "token.schema.json", "tokens create", ok("", "tokens", "create", "ci", "--scope", "runs:read", "--expires", "1h", "--json"))
	tokID := d["token"].(map[string]any)["id"].(string)
	validDoc(t, "tokens.schema.json", "tokens list", ok("", "tokens", "list", "--all", "--json"))
	if out := ok("", "tokens", "list"); !strings.Contains(out, tokID) || !strings.Contains(out, "runs:read") {
		t.Errorf("tokens list: %s", out)
	}
	validDoc(t, "token.schema.json", "tokens revoke", ok("", "tokens", "revoke", tokID, "--json"))
	validDoc(t, "quota.schema.json", "quota", ok("", "quota", "--json"))
	if out := ok("", "quota"); !strings.Contains(out, "concurrent runs") {
		t.Errorf("quota: %s", out)
	}
	// A run command to the logged-in server sends the kept token.
	h.env["AGENTRUN_SERVER"] = hs.URL
	validDoc(t, "list.schema.json", "list", ok("", "list", "--json"))
	delete(h.env, "AGENTRUN_SERVER")

	validDoc(t, "logout.schema.json", "logout", ok("", "logout", "--json"))
	if code, out, _ := run("", "tokens", "list", "--json"); code != 2 || !strings.Contains(out, "not_logged_in") {
		t.Errorf("tokens after logout: %d %s", code, out)
	}
}

// env2 is the home's environment as a getenv function.
func (h *testHome) env2() func(string) string { return func(k string) string { return h.env[k] } }

// A team server's runs show who submitted them: a BY column in list,
// a line in status.
func TestSubmittedByShown(t *testing.T) {
	h := newTestHome(t)
	r := h.addFinished(func(r *run.Run) { r.SubmittedBy = &run.Submitter{ID: "u_x", Name: "alice"} })
	h.addFinished(nil)
	if code, out, errb := h.exec("list"); code != 0 || !strings.Contains(out, "BY") || !strings.Contains(out, "alice") {
		t.Errorf("list: %d %s %s", code, out, errb)
	}
	if code, out, _ := h.exec("status", r.ID); code != 0 || !strings.Contains(out, "submitted by") || !strings.Contains(out, "alice") {
		t.Errorf("status: %d %s", code, out)
	}
}
