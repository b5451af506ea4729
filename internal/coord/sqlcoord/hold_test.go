package sqlcoord_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

// TestHoldFor: a lease held on another's behalf stays held only while its
// holder's renewals come; once its expiry passes, Acquire takes it with a
// greater token, the old holder's renewal no longer returns it, HeldBy
// refuses the old token and DropFor with it frees nothing.
func TestHoldFor(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		const ttl = 2 * time.Second
		url := newURL(t)
		srv, other := openCoord(t, url, ttl), openCoord(t, url, time.Minute)
		id := run.NewID()
		tok, ok, err := srv.HoldFor(ctx, id, "host:a")
		if err != nil || !ok {
			t.Fatalf("HoldFor: %v, %v", ok, err)
		}
		if _, ok, _ := srv.HoldFor(ctx, id, "host:b"); ok {
			t.Fatal("a second HoldFor took a held lease")
		}
		for range 4 {
			time.Sleep(ttl / 3)
			got, err := srv.RenewHolder(ctx, "host:a")
			if err != nil || got[id] != tok {
				t.Fatalf("RenewHolder: %v, %v; want %s:%d", got, err, id, tok)
			}
		}
		if held, err := srv.HeldBy(ctx, id, tok, "host:a"); err != nil || !held {
			t.Fatalf("HeldBy while renewed: %v, %v", held, err)
		}
		if _, err := other.Acquire(ctx, id, 0); !errors.Is(err, coord.ErrHeld) {
			t.Fatalf("Acquire of a renewed lease: %v", err)
		}
		time.Sleep(ttl + ttl/2) // the heartbeats stop
		l := mustAcquire(t, other, id)
		if l.Token() <= tok {
			t.Fatalf("token %d after %d", l.Token(), tok)
		}
		if got, _ := srv.RenewHolder(ctx, "host:a"); len(got) != 0 {
			t.Fatalf("RenewHolder after the loss: %v", got)
		}
		if held, _ := srv.HeldBy(ctx, id, tok, "host:a"); held {
			t.Fatal("HeldBy takes the old token")
		}
		if err := srv.DropFor(ctx, id, tok, "host:a"); err != nil {
			t.Fatal(err)
		}
		if held, _ := other.Held(ctx, id); !held {
			t.Fatal("DropFor with the old token freed the new holder's lease")
		}
	})
}
