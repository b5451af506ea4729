// Package audit is the team server's tamper-evident audit trail: a
// hash-chained log of every state-changing request and every run event,
// sealed now and then by a checkpoint signed with the server's ed25519
// key.
//
// An Entry carries the hash of the entry before it (PrevHash) and its own
// Hash, SHA-256 over a canonical encoding of (seq, time, actor, action,
// run, payload, prev_hash) (Entry.ComputeHash): changing, removing,
// inserting or reordering an entry breaks the chain where it happened. A
// hash chain alone binds nothing against someone who can write the
// database: he can recompute every hash after the entry he changed. A
// Checkpoint binds the chain up to its seq: its signature, by a key kept
// in the server's data directory and never in the database, covers the
// head hash there, so any change at or before a checkpoint is detected
// with a key the user pinned. What comes after the last checkpoint (at
// most Checkpointer.Every entries, or Checkpointer.Interval of time) can
// be cut off or rewritten unseen; Verify says how many entries that is.
//
// Verify is pure: it takes the entries and checkpoints (from a server or
// from a file exported earlier, see ReadExport) and the pinned keys, and
// names the first bad entry and what happened to it. The log itself is
// kept by a Log (internal/audit/sqlaudit on the server's database), which
// serialises appends so that the chain never forks.
//
// What it must never do: trust a key it is handed by the log it checks,
// or accept a checkpoint whose signature does not verify with a pinned
// key.
package audit
