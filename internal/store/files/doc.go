// Package files is the Lite run store: run.Store on the file system, one
// directory per run under $AGENTRUN_HOME/runs (paths from internal/layout).
//
//	runs/<id>/run.json      the record; replaced atomically (temp file in the
//	                        same directory, fsync, rename, fsync directory
//	                        unless the run moves to an active state)
//	runs/<id>/run.lock      exclusive flock held around every read-modify-write
//	                        of run.json (Update, Transition, Delete)
//	runs/<id>/events.jsonl  append-only JSON lines; each append holds an
//	                        exclusive flock on the journal itself, assigns the
//	                        next Seq, writes one line with O_APPEND and fsyncs
//	seq                     the submission counter, updated under its own flock
//
// An AppendEvent is fsynced before it returns, and so is a state event
// before its record is replaced. An AppendEventLazy (a supervisor's
// progress: sandbox started, attempt ended) is written at once but not
// waited for: the next state event's fsync covers it, or a timer's within
// a second (run.LazyJournal). On a journaled file system each fsync is a
// journal commit (0.3-1.7 ms on a journaled ext4 here; a full cache flush
// on macOS, whose fsync is F_FULLFSYNC), and a run's path was 25 of them
// one after another. The fsyncs that must come before a rename run side
// by side: a transition's journal line and its new record; at Create, the
// submission counter, the record and the scratch directory.
//
// A move to an active state (queued, preparing, running, checking,
// exporting) skips the last fsync, the directory's after the rename: the
// rename is as atomic as any, and it is made durable when the file system
// next commits (on a journaled file system, the next fsync of any file
// there: the run's next state event at the latest). What a power loss can
// undo is only such a move, so the record comes back in the state before
// it, with its journal line fsynced beside it: an active run whose
// supervisor is gone either way, which the next command marks interrupted
// and `agentrun resume` continues. Create, Update and every move to a
// terminal state are durable before they return. That saves a run three
// fsyncs one after another (queued to preparing to running to exporting),
// each a journal commit, or a full cache flush on macOS.
//
// The flocks are taken on a fresh open file description per operation, so
// they exclude goroutines of one process as well as other processes. Lock
// order is run.lock, then the journal, then nothing: no method takes them
// the other way round.
//
// Crash safety: Create builds a run in runs/.tmp-<id>-<random> and renames
// the finished directory into place, so a crash never leaves a half-made
// run that List shows; Delete renames the run away under its lock before
// removing it. A torn last journal line (a crash mid-append) is skipped by
// readers and terminated by the next append. A damaged run.json affects only
// its own run: Get reports run.ErrCorrupt naming it, List reports it as a
// run.Broken beside the readable runs.
//
// The store never turns an unvalidated string into a path: every id or
// prefix passes run.ValidateID / run.ValidatePrefix first, and names found
// in runs/ that are not valid ids are ignored. It never follows a symlink
// when making files writable for removal.
package files
