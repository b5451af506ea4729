package sqlcoord_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/coord/sqlcoord"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/sqldb"
	"github.com/agentrun/agentrun/internal/sqldb/sqltest"
)

func rawDB(t *testing.T, url string) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustAcquire(t *testing.T, c coord.Coordinator, id string) coord.Lease {
	t.Helper()
	l, err := c.Acquire(ctx, id, 0)
	if err != nil {
		t.Fatalf("Acquire %s: %v", id, err)
	}
	return l
}

// TestLeaseOutlivesTTL: a lease stays held for as long as its holder
// lives, many TTLs, because the holder renews it; so does a slot.
func TestLeaseOutlivesTTL(t *testing.T) {
	t.Parallel()
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		t.Parallel()
		// Long enough that a renewal held up on a loaded machine under
		// -race still lands within the TTL.
		const ttl = 3 * time.Second
		url := newURL(t)
		a, b := openCoord(t, url, ttl), openCoord(t, url, ttl)
		id := run.NewID()
		l := mustAcquire(t, a, id)
		s, err := a.TrySlot(ctx, l, 1, 1, nil)
		if err != nil || s == nil {
			t.Fatalf("TrySlot: %v, %v", s, err)
		}
		for end := time.Now().Add(4 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
			if h, err := b.Held(ctx, id); err != nil || !h {
				t.Fatalf("Held from another holder: %v, %v; want true while the holder lives", h, err)
			}
		}
		if _, err := b.Acquire(ctx, id, 0); !errors.Is(err, coord.ErrHeld) {
			t.Fatalf("Acquire after 4 TTLs: %v; want ErrHeld", err)
		}
		other := mustAcquire(t, b, run.NewID())
		if s2, err := b.TrySlot(ctx, other, 2, 1, nil); err != nil || s2 != nil {
			t.Fatalf("TrySlot of the one slot after 4 TTLs: %v, %v; want none free", s2, err)
		}
		if err := a.Enqueue(ctx, l, 1); err != nil {
			t.Fatalf("Enqueue with the renewed lease: %v", err)
		}
	})
}

// TestLostLease: a lease whose expiry passed is another holder's once
// taken. The old holder's writes are refused (ErrLost, which is
// ErrReleased), its Release frees nothing, and the new token is greater.
func TestLostLease(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		url := newURL(t)
		a, b := openCoord(t, url, time.Minute), openCoord(t, url, time.Minute)
		raw := rawDB(t, url)
		id := run.NewID()
		old := mustAcquire(t, a, id)
		// The holder stalled past its expiry (as if its renewals stopped).
		if _, err := raw.Write().ExecContext(ctx, `UPDATE coord_leases SET expires_at = 0 WHERE run_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		if h, _ := b.Held(ctx, id); h {
			t.Fatal("Held: true for an expired lease")
		}
		taken := mustAcquire(t, b, id)
		if taken.Token() <= old.Token() {
			t.Fatalf("token %d after %d", taken.Token(), old.Token())
		}
		err := a.Enqueue(ctx, old, 1)
		if !errors.Is(err, sqlcoord.ErrLost) || !errors.Is(err, coord.ErrReleased) {
			t.Fatalf("Enqueue with a lost lease: %v; want ErrLost and ErrReleased", err)
		}
		if s, err := a.TrySlot(ctx, old, 1, 1, nil); !errors.Is(err, coord.ErrReleased) || s != nil {
			t.Fatalf("TrySlot with a lost lease: %v, %v; want ErrReleased", s, err)
		}
		if err := old.Release(); err != nil {
			t.Fatal(err)
		}
		if h, _ := a.Held(ctx, id); !h {
			t.Fatal("the lost lease's Release freed the new holder's lease")
		}
		s, err := b.TrySlot(ctx, taken, 1, 1, nil)
		if err != nil || s == nil {
			t.Fatalf("TrySlot of the new holder: %v, %v", s, err)
		}
	})
}

// TestExpiredLeaseNotRenewed: the holder's renewals do not bring back a
// lease whose expiry passed (another holder may have taken it meanwhile),
// and its writes are refused.
func TestExpiredLeaseNotRenewed(t *testing.T) {
	t.Parallel()
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		t.Parallel()
		const ttl = 300 * time.Millisecond
		url := newURL(t)
		a := openCoord(t, url, ttl)
		raw := rawDB(t, url)
		id := run.NewID()
		l := mustAcquire(t, a, id)
		if _, err := raw.Write().ExecContext(ctx, `UPDATE coord_leases SET expires_at = 0 WHERE run_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * ttl)
		if h, _ := a.Held(ctx, id); h {
			t.Fatal("a renewal revived an expired lease")
		}
		if s, err := a.TrySlot(ctx, l, 1, 1, nil); !errors.Is(err, sqlcoord.ErrLost) || s != nil {
			t.Fatalf("TrySlot: %v, %v; want ErrLost", s, err)
		}
	})
}

// TestLostSlot: a slot whose expiry passed may be taken by another run;
// the old take's Release does not free the new one.
func TestLostSlot(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		url := newURL(t)
		a, b := openCoord(t, url, time.Minute), openCoord(t, url, time.Minute)
		raw := rawDB(t, url)
		la, lb := mustAcquire(t, a, run.NewID()), mustAcquire(t, b, run.NewID())
		old, err := a.TrySlot(ctx, la, 1, 1, nil)
		if err != nil || old == nil {
			t.Fatalf("TrySlot: %v, %v", old, err)
		}
		if _, err := raw.Write().ExecContext(ctx, `UPDATE coord_slots SET expires_at = 0`); err != nil {
			t.Fatal(err)
		}
		s, err := b.TrySlot(ctx, lb, 2, 1, nil)
		if err != nil || s == nil {
			t.Fatalf("TrySlot of an expired slot: %v, %v", s, err)
		}
		if err := old.Release(); err != nil {
			t.Fatal(err)
		}
		if s3, err := a.TrySlot(ctx, la, 1, 1, nil); err != nil || s3 != nil {
			t.Fatalf("after the old take's Release: %v, %v; want the slot still taken", s3, err)
		}
	})
}

// TestCloseReleases: Close gives up every lease and slot at once, so
// nobody waits for their expiry after a clean shutdown; a closed
// coordinator acquires nothing.
func TestCloseReleases(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		url := newURL(t)
		a, b := openCoord(t, url, time.Hour), openCoord(t, url, time.Hour)
		id := run.NewID()
		l := mustAcquire(t, a, id)
		if s, err := a.TrySlot(ctx, l, 1, 1, nil); err != nil || s == nil {
			t.Fatalf("TrySlot: %v, %v", s, err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if h, _ := b.Held(ctx, id); h {
			t.Fatal("Held after the holder's Close")
		}
		lb := mustAcquire(t, b, run.NewID())
		if s, err := b.TrySlot(ctx, lb, 1, 1, nil); err != nil || s == nil {
			t.Fatalf("TrySlot after the holder's Close: %v, %v; want its slot free", s, err)
		}
		if _, err := a.Acquire(ctx, run.NewID(), 0); err == nil {
			t.Fatal("Acquire on a closed coordinator succeeded")
		}
		if err := l.Release(); err != nil {
			t.Fatalf("Release after Close: %v", err)
		}
	})
}

// TestForeignLease: a lease of another coordinator is refused, even on
// the same database.
func TestForeignLease(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, newURL func(testing.TB) string) {
		url := newURL(t)
		a, b := openCoord(t, url, time.Minute), openCoord(t, url, time.Minute)
		l := mustAcquire(t, a, run.NewID())
		if err := b.Enqueue(ctx, l, 1); err == nil {
			t.Fatal("Enqueue with another coordinator's lease succeeded")
		}
		if s, err := b.TrySlot(ctx, l, 1, 1, nil); err == nil || s != nil {
			t.Fatalf("TrySlot with another coordinator's lease: %v, %v", s, err)
		}
	})
}
