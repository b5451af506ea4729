package riverq

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/sqldb"
)

// queueName is River's queue the dispatch jobs go to.
const queueName = "dispatch"

// Defaults of Options.
const (
	DefaultHold    = 10 * time.Second
	DefaultWorkers = 2000
	// DefaultPoll is how often River looks for jobs inserted by another
	// process on SQLite (PostgreSQL is told by NOTIFY).
	DefaultPoll = 200 * time.Millisecond
)

// pgConns bounds River's pool on PostgreSQL.
const pgConns = 8

// refusedSnooze is how long a job whose taker could not take the run's
// lease waits before it is offered again (the lease of a lost holder
// that has not expired yet, a run the server's worker is starting).
const refusedSnooze = 250 * time.Millisecond

// Options tune a Queue.
type Options struct {
	// Hold is how long a dispatch job waits for a taker before River
	// snoozes it (default DefaultHold).
	Hold time.Duration
	// Workers is how many dispatch jobs are held at once (default
	// DefaultWorkers): beyond them, runs wait in River's table, in order.
	Workers int
	// Poll is River's fetch poll on SQLite (default DefaultPoll).
	Poll time.Duration
	// Log is where River's own warnings and errors go (the server's
	// log; nil: nowhere), marked component=river.
	Log *slog.Logger
}

// dispatchArgs is the dispatch job: run Run, queued at Queued (the run's
// update time then, in microseconds). Swept is set on the job a sweep
// inserts for a queueing whose job it found running (held by a server
// that may be gone): the time of that sweep.
type dispatchArgs struct {
	Run    string `json:"run"`
	Queued int64  `json:"queued"`
	Swept  int64  `json:"swept,omitempty"`
}

func (dispatchArgs) Kind() string { return "dispatch" }

// live are the states of a job not finished: a queueing is inserted
// again only once its job finished (a run its taker could not start is
// offered again).
var live = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled}

func (dispatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queueName, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: live}}
}

// Queue is the dispatch queue on one database. Enqueue works from Open;
// jobs are worked (handed to takers) from Start to Stop.
type Queue struct {
	hold time.Duration
	m    matcher

	insert  func(ctx context.Context, ps []river.InsertManyParams) error
	running func(ctx context.Context) (map[string]bool, error)
	start   func(ctx context.Context) error
	stop    func(ctx context.Context) error
	down    func(ctx context.Context) error
	pool    *pgxpool.Pool

	mu      sync.Mutex
	check   queue.Check
	started bool
	stopped bool
}

// Open opens the queue on db, whose URL is url (PostgreSQL: River opens a
// pgx pool of its own on it), and brings River's tables up to date with
// River's own migrations.
func Open(ctx context.Context, db *sqldb.DB, url string, o Options) (*Queue, error) {
	q := &Queue{hold: o.Hold}
	if q.hold <= 0 {
		q.hold = DefaultHold
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &dispatcher{q: q})
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{queueName: {MaxWorkers: o.Workers}},
		Workers: workers,
		// Bursts of submits are fetched together at most this often.
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: o.Poll,
		// The dispatcher bounds itself (Hold); a job running for longer
		// was left by a server that died, and is worked again.
		JobTimeout:           -1,
		RescueStuckJobsAfter: q.hold + 20*time.Second,
		RetryPolicy:          soon{},
		Logger:               riverLog(o.Log),
	}
	if cfg.Queues[queueName].MaxWorkers <= 0 {
		cfg.Queues[queueName] = river.QueueConfig{MaxWorkers: DefaultWorkers}
	}
	var err error
	switch db.Dialect {
	case sqldb.Postgres:
		cfg.FetchPollInterval = time.Second
		var pc *pgxpool.Config
		if pc, err = pgxpool.ParseConfig(url); err == nil {
			// River's listener keeps one connection; inserts, fetches and
			// completions share the others.
			pc.MaxConns = pgConns
			q.pool, err = pgxpool.NewWithConfig(ctx, pc)
		}
		if err == nil {
			err = build(ctx, q, riverpgxv5.New(q.pool), riverpgxv5.New(q.pool), cfg)
		}
	case sqldb.SQLite:
		if cfg.FetchPollInterval <= 0 {
			cfg.FetchPollInterval = DefaultPoll
		}
		drv := riversqlite.New(db.Write())
		err = build(ctx, q, polling{drv}, drv, cfg)
	default:
		err = fmt.Errorf("no queue on %s", db.Dialect)
	}
	if err != nil {
		q.Close()
		return nil, fmt.Errorf("open queue: %w", err)
	}
	return q, nil
}

// build makes q's River client on driver, once River's tables are up to
// date (migrated through mig, the same database's plain driver).
func build[TTx any, TM any](ctx context.Context, q *Queue, driver riverdriver.Driver[TTx], mig riverdriver.Driver[TM], cfg *river.Config) error {
	m, err := rivermigrate.New(mig, &rivermigrate.Config{Logger: cfg.Logger})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("the queue's tables (River's migrations): %w", err)
	}
	client, err := river.NewClient(driver, cfg)
	if err != nil {
		return err
	}
	q.insert = func(ctx context.Context, ps []river.InsertManyParams) error {
		_, err := client.InsertMany(ctx, ps)
		return err
	}
	q.running = func(ctx context.Context) (map[string]bool, error) {
		res, err := client.JobList(ctx, river.NewJobListParams().Kinds(dispatchArgs{}.Kind()).
			States(rivertype.JobStateRunning).First(10_000))
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, j := range res.Jobs {
			var a dispatchArgs
			if json.Unmarshal(j.EncodedArgs, &a) == nil {
				out[a.Run] = true
			}
		}
		return out, nil
	}
	q.start = client.Start
	q.stop = client.StopAndCancel
	q.down = func(ctx context.Context) error {
		_, err := m.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
		return err
	}
	return nil
}

// polling is the SQLite driver in River's poll-only mode: River then
// wakes its fetch at once on an insert made through this process's
// client, where the driver's emulated listener would look only every
// 50 ms (and write an outbox row with every insert).
type polling struct{ *riversqlite.Driver }

func (polling) SupportsListener() bool     { return false }
func (polling) SupportsListenNotify() bool { return false }

// Enqueue inserts the dispatch jobs of runs queued; a queueing whose job
// exists already is skipped.
func (q *Queue) Enqueue(ctx context.Context, runs ...queue.Queued) error {
	if len(runs) == 0 {
		return nil
	}
	ps := make([]river.InsertManyParams, len(runs))
	for i, r := range runs {
		ps[i] = river.InsertManyParams{Args: dispatchArgs{Run: r.ID, Queued: r.At.UnixMicro()}}
	}
	if err := q.insert(ctx, ps); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return nil
}

// Sweep inserts the jobs of runs queued that may have none, at a server's
// start: a queueing whose job exists is skipped, as by Enqueue, but one
// whose job is running gets a second job. Such a job was held by a server
// that died (River's rescuer would make it available again only once it
// is older than the rescue bound) or is held by another server; either
// way the run's lease decides who takes it, and the job that finds the
// run taken completes.
func (q *Queue) Sweep(ctx context.Context, runs []queue.Queued) error {
	if len(runs) == 0 {
		return nil
	}
	held, err := q.running(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	now := time.Now().UnixMicro()
	ps := make([]river.InsertManyParams, len(runs))
	for i, r := range runs {
		a := dispatchArgs{Run: r.ID, Queued: r.At.UnixMicro()}
		if held[r.ID] {
			a.Swept = now
		}
		ps[i] = river.InsertManyParams{Args: a}
	}
	if err := q.insert(ctx, ps); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}

// Start starts working the dispatch jobs: each is checked with check and
// then offered to takers (Next). A second Start does nothing.
func (q *Queue) Start(ctx context.Context, check queue.Check) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || q.stopped {
		return nil
	}
	q.check = check
	if err := q.start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start queue: %w", err)
	}
	q.started = true
	return nil
}

// Stop stops working jobs: the jobs held are made available again at
// once (for the next start). Stop before Start, and a second Stop, are
// fine.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	started := q.started && !q.stopped
	q.stopped = true
	q.mu.Unlock()
	if !started {
		return nil
	}
	if err := q.stop(ctx); err != nil {
		return fmt.Errorf("stop queue: %w", err)
	}
	return nil
}

// Close stops the queue and closes what Open opened.
func (q *Queue) Close() error {
	var err error
	if q.stop != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = q.Stop(ctx)
		cancel()
	}
	if q.pool != nil {
		q.pool.Close()
	}
	return err
}

// MigrateDown removes River's tables (the schema's way down).
func (q *Queue) MigrateDown(ctx context.Context) error {
	if err := q.down(ctx); err != nil {
		return fmt.Errorf("the queue's tables down (River's migrations): %w", err)
	}
	return nil
}

// Next waits until ctx ends for a run that fits and returns it with done,
// which the caller must call with whether it took the run (its lease). A
// run waiting already is returned even with ctx ended.
func (q *Queue) Next(ctx context.Context, fits func(queue.Offer) bool) (queue.Offer, func(took bool), error) {
	return q.m.next(ctx, fits)
}

// Waiting are the runs held for a taker now, oldest first.
func (q *Queue) Waiting() []queue.Offer { return q.m.waiting() }

func (q *Queue) checker() queue.Check {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.check
}

// dispatcher is River's worker for dispatch jobs.
type dispatcher struct {
	river.WorkerDefaults[dispatchArgs]
	q *Queue
}

func (d *dispatcher) Work(ctx context.Context, job *river.Job[dispatchArgs]) error {
	check := d.q.checker()
	o, ok, err := check(ctx, job.Args.Run)
	switch {
	case ctx.Err() != nil:
		return river.JobSnooze(0)
	case err != nil:
		return err
	case !ok:
		return nil // started, claimed, cancelled or gone: nothing to hand out
	}
	took, answered := d.q.m.offer(ctx, o, d.q.hold)
	switch {
	case took:
		return nil
	case ctx.Err() != nil:
		// The server stops: the job is available again at once, for its
		// next start.
		return river.JobSnooze(0)
	case !answered:
		return river.JobSnooze(0) // no taker within Hold: offered again, after the runs fetched meanwhile
	}
	if _, ok, err := check(ctx, job.Args.Run); err == nil && !ok {
		return nil
	}
	return river.JobSnooze(refusedSnooze)
}

// soon retries a failed dispatch job (the database failed its check)
// soon: a queued run waits no longer than the failure lasts.
type soon struct{}

func (soon) NextRetry(j *rivertype.JobRow) time.Time {
	return time.Now().Add(time.Duration(min(j.Attempt, 20)) * 100 * time.Millisecond)
}

// lowered is the server's log as River's: River's debug and info lines
// (a job snoozed, a leader elected) go four levels down, below what the
// server logs at its level, while its warnings and errors (a failed
// fetch, a rescued job) keep theirs.
type lowered struct{ slog.Handler }

func lower(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return l - 4
	}
	return l
}

func (h lowered) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, lower(l))
}

func (h lowered) Handle(ctx context.Context, r slog.Record) error {
	r.Level = lower(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h lowered) WithAttrs(a []slog.Attr) slog.Handler { return lowered{h.Handler.WithAttrs(a)} }
func (h lowered) WithGroup(n string) slog.Handler      { return lowered{h.Handler.WithGroup(n)} }

// riverLog is River's logger on l (nil: nowhere), its lines marked
// component=river.
func riverLog(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(lowered{l.Handler()}).With("component", "river")
}
