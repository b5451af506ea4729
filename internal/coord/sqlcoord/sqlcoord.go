package sqlcoord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/sqldb"
)

// DefaultLeaseTTL is how long a lease or slot outlives its holder's last
// renewal when Options leave it zero: a lost host's runs wait that long at
// most before another host may take them over.
const DefaultLeaseTTL = 15 * time.Second

// opTimeout bounds the statements that have no caller's context: releases
// and renewals.
const opTimeout = 30 * time.Second

// ErrLost means a lease's expiry passed without a renewal (its holder's
// process stalled or lost the database for longer than the TTL), so it may
// be another holder's now. It comes wrapped with coord.ErrReleased.
var ErrLost = errors.New("the lease was lost: its expiry passed without a renewal")

// Options tune a Coordinator.
type Options struct {
	// LeaseTTL is how long a lease or slot stays held after its holder's
	// last renewal; the holder renews every LeaseTTL/3. Zero:
	// DefaultLeaseTTL.
	LeaseTTL time.Duration
}

// Coordinator is coord.Coordinator on a SQL database. Every Coordinator
// is one holder: the leases and slots it takes carry its holder id, and
// one goroutine renews all of them together until they are released or
// Close is called. Coordinators on the same database (in one process or
// on several hosts) share the leases, the queue and the slots.
type Coordinator struct {
	db     *sqldb.DB
	ownDB  bool
	holder string
	ttl    time.Duration

	mu        sync.Mutex
	closed    bool
	leases    map[*lease]struct{} // held here, renewed
	slots     map[*slot]struct{}
	slotsMade int // slot rows 0..slotsMade-1 are known to exist

	stop chan struct{}
	done chan struct{}
}

var _ coord.Coordinator = (*Coordinator)(nil)

// Open opens the database at url (see sqldb.Connect), brings its schema
// up to date, and returns a coordinator on it; Close closes the database.
func Open(ctx context.Context, url string, opt Options) (*Coordinator, error) {
	db, err := sqldb.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("open coordinator: %w", err)
	}
	c := New(db, opt)
	c.ownDB = true
	return c, nil
}

// New returns a coordinator on db, whose schema is up to date
// (sqldb.Open), and starts its renewals. Close stops them and leaves db
// open.
func New(db *sqldb.DB, opt Options) *Coordinator {
	ttl := opt.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	c := &Coordinator{
		db:     db,
		holder: newHolderID(),
		ttl:    ttl,
		leases: map[*lease]struct{}{},
		slots:  map[*slot]struct{}{},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go c.renewLoop()
	return c
}

// newHolderID names this holder in the database: the host and process,
// for whoever reads the tables, and random bytes, so that two holders
// never share an id.
func newHolderID() string {
	host, _ := os.Hostname()
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Holder is the id this coordinator's leases and slots carry.
func (c *Coordinator) Holder() string { return c.holder }

// Close stops the renewals and releases every lease and slot still held
// here, so that other holders need not wait for their expiry; it closes
// the database if Open opened it. Idempotent.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	slots, leases := keys(c.slots), keys(c.leases)
	c.mu.Unlock()
	close(c.stop)
	<-c.done
	var errs []error
	for _, s := range slots {
		errs = append(errs, s.Release())
	}
	for _, l := range leases {
		errs = append(errs, l.Release())
	}
	if c.ownDB {
		errs = append(errs, c.db.Close())
	}
	return errors.Join(errs...)
}

func keys[K comparable](m map[K]struct{}) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ttlMicros is the TTL as the microseconds the tables count in.
func (c *Coordinator) ttlMicros() int64 { return c.ttl.Microseconds() }

// renewLoop renews every lease and slot held here every TTL/3 until Close.
func (c *Coordinator) renewLoop() {
	defer close(c.done)
	t := time.NewTicker(c.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			// A failed renewal is tried again at the next tick; if none
			// succeeds within the TTL the leases expire, as a lost host's
			// do, and the next renewal finds them lost.
			_ = c.renew()
		}
	}
}

// renew pushes the expiry of every unexpired lease and slot of this holder
// out by the TTL, and marks lost those it held that had expired (another
// holder may have them now). Only what was tracked before the statements
// ran is judged: a lease acquired meanwhile is not yet in the snapshot.
func (c *Coordinator) renew() error {
	c.mu.Lock()
	leases, slots := keys(c.leases), keys(c.slots)
	c.mu.Unlock()
	if len(leases) == 0 && len(slots) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(c.ttl, opTimeout))
	defer cancel()
	now := c.db.NowMicros()
	type key struct {
		id  string
		num int64
	}
	renewed := map[key]bool{}
	for _, q := range []string{
		`UPDATE coord_leases SET expires_at = ` + now + ` + $2 WHERE holder = $1 AND expires_at > ` + now + ` RETURNING run_id, token`,
		`UPDATE coord_slots SET expires_at = ` + now + ` + $2 WHERE holder = $1 AND expires_at > ` + now + ` RETURNING CAST(k AS TEXT), gen`,
	} {
		rows, err := c.db.Write().QueryContext(ctx, q, c.holder, c.ttlMicros())
		if err != nil {
			return fmt.Errorf("renew leases: %w", err)
		}
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.id, &k.num); err != nil {
				rows.Close()
				return fmt.Errorf("renew leases: %w", err)
			}
			renewed[k] = true
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("renew leases: %w", err)
		}
	}
	for _, l := range leases {
		if !renewed[key{l.id, l.token}] {
			l.markLost()
		}
	}
	for _, s := range slots {
		if !renewed[key{fmt.Sprint(s.k), s.gen}] {
			s.markLost()
		}
	}
	return nil
}

// track records a lease or slot just taken, for renewal; on a closed
// coordinator it is refused (and its caller releases it).
func (c *Coordinator) track(l *lease, s *slot) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if l != nil {
		c.leases[l] = struct{}{}
	}
	if s != nil {
		c.slots[s] = struct{}{}
	}
	return true
}

func (c *Coordinator) untrack(l *lease, s *slot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.leases, l)
	delete(c.slots, s)
}

var errClosed = errors.New("the coordinator is closed")

func (c *Coordinator) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
