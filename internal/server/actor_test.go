package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/audit/sqlaudit"
	"github.com/agentrun/agentrun/internal/server"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
	"github.com/agentrun/agentrun/internal/users"
)

// TestAuditActor: a request's entry names its actor as Options.Actor
// says, else its principal (the bootstrap admin for the server token); the verdict's body and the
// command's answer ride in its payload, a refused request's error code
// too.
func TestAuditActor(t *testing.T) {
	db, err := sqldb.Open(context.Background(), sqltest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	trail := sqlaudit.New(db)
	// The command the route runs answers as agentrun verdict --json does
	// (the server package's own flow tests run the real one).
	exec := func(_ context.Context, args []string, _ io.Reader) ([]byte, []byte, int) {
		if args[len(args)-2] == "nosuch" {
			return []byte(`{"error":{"code":"run_not_found","error":"run not found","exit_code":3}}`), nil, 3
		}
		return []byte(`{"id":"abcdefghjk","verdict":{"value":"accept"}}`), nil, 0
	}
	for _, tc := range []struct {
		actor func(*http.Request) string
		id    string
		want  string
	}{
		{nil, "abc", users.BootstrapName},
		{func(r *http.Request) string { return r.Header.Get("X-Test-User") }, "abc", "alice"},
		{nil, "nosuch", users.BootstrapName},
	} {
		s := server.New(server.Options{Exec: exec, Token: "secret", Audit: trail, Actor: tc.actor, Log: slog.New(slog.DiscardHandler)})
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/runs/"+tc.id+"/verdict", strings.NewReader(`{"verdict":"accept","note":"fine"}`))
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer secret")
		req.Header.Set("X-Test-User", "alice")
		s.Handler().ServeHTTP(rec, req)
		es, err := trail.Entries(context.Background(), audit.Query{})
		if err != nil || len(es) == 0 {
			t.Fatalf("entries %v, %v", es, err)
		}
		e := es[len(es)-1]
		var p map[string]any
		_ = json.Unmarshal(e.Payload, &p)
		if e.Actor != tc.want || e.Action != "verdict" {
			t.Errorf("actor %q action %q, want %q verdict", e.Actor, e.Action, tc.want)
		}
		req0, _ := p["request"].(map[string]any)
		if req0["note"] != "fine" || p["route"] != "/v1/runs/{id}/verdict" {
			t.Errorf("payload %s", e.Payload)
		}
		switch tc.id {
		case "nosuch":
			if e.Run != "nosuch" || p["error"] != "run_not_found" || p["status"] != float64(404) {
				t.Errorf("refused: run %q, payload %s", e.Run, e.Payload)
			}
		default:
			if e.Run != "abcdefghjk" || p["status"] != float64(200) {
				t.Errorf("run %q (want the answer's id), payload %s", e.Run, e.Payload)
			}
		}
	}
}
