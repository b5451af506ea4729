// Package sqlcoord is the coordinator of Full mode: coord.Coordinator on
// a SQL database (internal/sqldb: SQLite for one host, PostgreSQL for
// several), shared by every coordinator on the same database.
//
//	coord_leases  one row per run ever acquired: the fencing token (counted
//	              up by every Acquire, never reset), the holder and the
//	              expiry (NULL holder: released)
//	coord_queue   (seq, run, token): a run waiting for a slot, made by the
//	              lease with that token
//	coord_slots   slot k: the holder, the run and the expiry of its take,
//	              and gen, counted up by every take
//
// Liveness is an expiry on the database's clock, not a process: a lease
// or slot is held while its holder is set and its expiry is in the future.
// Each Coordinator is one holder (host, pid and random bytes) and renews
// everything it holds every TTL/3 in two statements, until Release or
// Close; so a lease stays held while its holder lives, and a holder that
// dies (its process killed, its host cut off) loses it once the TTL
// passes, after which the next Acquire takes the row and counts the token
// up. A renewal that finds a lease already expired marks it lost
// (ErrLost): it is not renewed back, because another holder may have it.
// Every write made with a lease (Enqueue, TrySlot) checks, in the same
// statement or transaction, that the row still carries the lease's token
// and this holder and has not expired.
//
// Serialisation: Acquire is one upsert that takes the row only if it is
// free or expired. TrySlot is one transaction: on PostgreSQL it locks the
// run's lease row and picks a slot row with FOR UPDATE SKIP LOCKED, so
// TrySlots of different runs go on side by side without taking one slot
// twice; on SQLite the transaction holds the database's write lock from
// its BEGIN, so TrySlots are serialised whole. admit runs inside that
// transaction, before the queue and the slots are looked at. On SQLite it
// must not write to the same database: the write would wait for the
// connection (in this process) or the lock (in another) that TrySlot
// holds until admit returns, that is until its context ends. Reads, such
// as the supervisor's Get, are fine.
//
// FIFO: a run may take a slot only if no entry older than its seq whose
// lease is still the one that queued it waits. Entries that fail that
// test are deleted by the TrySlot that meets them, by token, so an entry
// the same run queued again meanwhile survives. The queue is looked at on
// every TrySlot, before the slots: an index range up to the first live
// entry, at most 100 entries.
//
// Handover (passing a lease to a child process) is not implemented: a
// server's workers acquire leases in the process that supervises.
package sqlcoord
