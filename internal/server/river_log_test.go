package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/sqldb"
)

// TestServerLogsRiver: River's errors reach the server's log, marked
// component=river: with River's jobs' table renamed away under a running
// server, its fetches fail, and the log says so; its info lines do not.
func TestServerLogsRiver(t *testing.T) {
	each(t, func(t *testing.T, c config) {
		srv := start(t, c)
		ctx := context.Background()
		db, err := sqldb.Connect(ctx, c.db)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rename := func(from, to string) {
			if _, err := db.Write().ExecContext(ctx, `ALTER TABLE `+from+` RENAME TO `+to); err != nil {
				t.Fatal(err)
			}
		}
		// Its chatter (a client started, a leader elected) stays below the
		// server's level.
		time.Sleep(300 * time.Millisecond)
		if l := srv.log.String(); strings.Contains(l, `"component":"river"`) {
			t.Errorf("River logged at the start:\n%s", l)
		}
		rename("river_job", "river_job_away")
		defer rename("river_job_away", "river_job")
		for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			for l := range strings.SplitSeq(srv.log.String(), "\n") {
				if strings.Contains(l, `"component":"river"`) && strings.Contains(l, `"level":"ERROR"`) {
					t.Logf("the server's log: %s", l)
					return
				}
			}
			if time.Now().After(end) {
				t.Fatalf("no error of River's in the server's log:\n%s", srv.log.String())
			}
		}
	})
}
