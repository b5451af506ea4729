package riverq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/queue/riverq"
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

// TestRiverLogsToServerLog: with its jobs' table gone from under it,
// River's errors (its fetches fail) reach the server's log (a JSON log
// at the default level, as agentrun server's), marked component=river,
// while its info chatter of the start (migrations, leadership) stays
// below that level.
func TestRiverLogsToServerLog(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		ctx := context.Background()
		out := &syncBuf{}
		log := slog.New(slog.NewJSONHandler(out, nil))
		db, q := open(t, newURL(t), riverq.Options{Log: log, Poll: 50 * time.Millisecond})
		rs := &runs{waiting: map[string]int64{}, checks: map[string]int{}}
		if err := q.Start(ctx, rs.check); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		for _, l := range out.lines(t) {
			t.Errorf("logged at the start: %v", l)
		}
		rename := func(from, to string) {
			if _, err := db.Write().ExecContext(ctx, `ALTER TABLE `+from+` RENAME TO `+to); err != nil {
				t.Fatal(err)
			}
		}
		rename("river_job", "river_job_away")
		defer rename("river_job_away", "river_job") // for a clean stop
		// An insert wakes the fetch at once (PostgreSQL's poll is 1 s).
		_ = q.Enqueue(ctx, queue.Queued{ID: "r1", At: time.Now()})
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
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no River warning or error reached the log: %v", out.lines(t))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
