// Package sqlstore is the run store of Full mode: run.Store on a SQL
// database (internal/sqldb: SQLite for one host, PostgreSQL for several).
//
//	runs        one row per run: the record as JSON (doc), beside the
//	            columns List filters and orders by (state, repo,
//	            supervised, seq) and those the store counts (version,
//	            last_event); ids sort as bytes, so Resolve reads an index
//	            range
//	run_events  the journal: one row per event, keyed by (run, seq)
//	run_seq     the submission sequence (a PostgreSQL sequence, a counter
//	            row on SQLite)
//
// Every change of a run is one transaction that locks its row (SELECT ...
// FOR UPDATE on PostgreSQL; SQLite's write transactions hold the whole
// database): Update and Transition read, change and write the record, and
// a transition's state event is inserted in the same transaction, so the
// journal and the record always agree. AppendEvent counts the run's
// last_event up, which numbers one run's events in commit order without
// gaps. Nothing is written outside a transaction that commits whole.
//
// The columns seq and version are the truth; doc carries copies written
// with it. A doc that does not decode, names another run or holds an
// unknown state is a damaged record: Get reports run.ErrCorrupt naming the
// run, List reports it as a run.Broken beside the readable runs (its
// columns still match or miss the filter).
//
// Every id or prefix passes run.ValidateID / run.ValidatePrefix before it
// reaches a query, and every value reaches SQL as a parameter.
package sqlstore
