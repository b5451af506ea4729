package riverq_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/queue/riverq"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// syncBuf is a log's output, read while River writes to it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines are the JSON lines logged so far.
func (s *syncBuf) lines(t *testing.T) []map[string]interface{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]interface{}
	for l := range strings.SplitSeq(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]interface{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRiverLogsToServerLog: with its database gone from under it (SQLite
// closed; PostgreSQL's connections of the queue terminated), River's
// errors reach the server's log (a JSON log at the default level, as
// agentrun server's), marked component=river, while its info chatter of
// the start (migrations, leadership) stays below that level.
func TestRiverLogsToServerLog(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		ctx := context.Background()
		u := newURL(t)
		app := ""
		if strings.HasPrefix(u, "postgres") {
			var b [6]byte
			_, _ = rand.Read(b[:])
			app = "riverq_log_" + hex.EncodeToString(b[:])
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			q := pu.Query()
			q.Set("application_name", app)
			pu.RawQuery = q.Encode()
			u = pu.String()
		}
		out := &syncBuf{}
		log := slog.New(slog.NewJSONHandler(out, nil))
		db, q := open(t, u, riverq.Options{Log: log, Poll: 50 * time.Millisecond})
		rs := &runs{waiting: map[string]int64{}, checks: map[string]int{}}
		if err := q.Start(ctx, rs.check); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		for _, l := range out.lines(t) {
			t.Errorf("logged at the start: %v", l)
		}
		breakDB(t, db, u, app)
		deadline := time.Now().Add(20 * time.Second)
		for {
			var got []map[string]interface{}
			for _, l := range out.lines(t) {
				if l["component"] == "river" && (l["level"] == "ERROR" || l["level"] == "WARN") {
					got = append(got, l)
				}
			}
			if len(got) > 0 {
				t.Logf("River's first line: %v", got[0])
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no River warning or error reached the log: %v", out.lines(t))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// breakDB takes the queue's database away: SQLite's connections closed,
// or, on PostgreSQL, the server ends every connection of application app
// (the queue's pool and its listener among them).
func breakDB(t *testing.T, db *sqldb.DB, u, app string) {
	t.Helper()
	if app == "" {
		db.Close()
		return
	}
	ctx := context.Background()
	admin, err := sqldb.Open(ctx, strings.Replace(u, "application_name="+app, "application_name=admin_"+app, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	if err := admin.Write().QueryRowContext(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no connection of the queue to end")
	}
}
