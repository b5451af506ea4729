// Package riverq is the team server's dispatch queue (internal/queue's
// Queue) on River (github.com/riverqueue/river): what waits to be handed to an agent host
// (or to the server's own worker), in what order, what is handed out,
// retried, and rescued after a crash of the server.
//
// Every queueing of a run (a submit, a resume, a lost host's run queued
// again) inserts one River job, dispatch{run, queued}, unique by its
// arguments while not finished: queued is the run's update time at that
// queueing, so the same queueing inserted twice (by its queuer and by the
// sweep at start) is one job, while a later queueing of the same run is a
// new one even if the job of the earlier one has not been marked
// completed yet.
//
// River's worker for dispatch asks the server whether the run still waits
// (Check: queued, not started, not claimed, no cancel asked for) and then
// holds the job in an in-memory matcher until a taker that fits it (a
// host's claim: its backends, labels, free slots; or the server's worker)
// comes, oldest run first (by the run's queue seq). The taker takes the
// run's lease and says whether it did; the job completes once a taker has
// the run or the run no longer waits. A job no taker took within Hold is
// snoozed (made available again at once), a job whose taker failed to take
// the run is snoozed briefly, and a job whose worker died with its server
// is rescued by River's rescuer and worked again; so a queued run is never
// lost, and the lease's fencing token, not the job, decides who executes
// it.
//
// River owns the queue and its tables (made by rivermigrate at Open);
// internal/coord/sqlcoord still owns the leases and their fencing tokens,
// and the server the claims (host_claims).
//
// On PostgreSQL River runs on its pgx driver (riverpgxv5) with a pgx pool
// of its own on the same URL: an insert made by any process wakes the
// server's fetch through LISTEN/NOTIFY. On SQLite it runs on riversqlite
// over the database's one write connection, in River's poll-only mode: an
// insert made in this process wakes the fetch at once, one made by another
// process (agentrun server revoke-host) is fetched at the next poll.
package riverq
