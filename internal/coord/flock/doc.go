// Package flock is the Lite coordinator: coord.Coordinator and
// coord.Handover on flocks under the data directory ($AGENTRUN_HOME, paths
// from internal/layout). They are the files the supervisor kept before the
// coordinator was a seam, with the same names, modes and locking, so
// existing data directories keep working and an older binary sharing one
// sees the same leases, queue and slots.
//
//	runs/<id>/supervisor.lock  the run's lease: held by the open file of
//	                           its supervisor; holds the fencing token
//	queue/<seq>-<id>           one empty entry per run waiting for a slot,
//	                           seq zero-padded to 20 digits
//	queue.lock                 serialises TrySlot and Enqueue
//	slots/<k>.lock             slot k, held by the open file of a run's
//	                           supervisor
//
// A flock belongs to an open file description: it excludes other opens of
// the file in the same process as well as other processes, it is given up
// when the last descriptor of it is closed, and the kernel gives it up when
// the holding process dies, however it dies. So a lease needs no renewal
// and no expiry, and nothing is ever left held by a dead process. The
// flipside: a Lease or Slot whose last reference is dropped without
// Release is given up when the garbage collector closes its file.
//
// The fencing token is a decimal counter in supervisor.lock itself, counted
// up by every Acquire once the flock is taken (an empty file, made by an
// older version, counts as 0). Holding the flock is what makes the read
// and the write safe; nothing is fsynced, because after a crash no holder
// of an older token is left to use it. On a full disk the token is handed
// out without being recorded (the run's next lease may repeat it): a dead
// run must still be marked interrupted or removed, and a record on the
// same full disk cannot be written with any token meanwhile.
//
// Handover is how Lite starts a detached supervisor: the spawner acquires
// the lease, the child inherits File() as one of its descriptors (fd 3),
// the spawner releases its copy and the child Adopts the file. The flock
// stays held throughout, as the child's descriptor shares the open file
// description.
//
// Held and the FIFO sweep probe a lease by taking its flock without
// waiting and letting it go at once: for that instant a free lease looks
// held to an Acquire, which is why Acquire takes a wait. The probe of Held
// creates no file.
//
// Ids are checked with run.ValidateID before they become paths, and names
// in queue/ that are not "<seq>-<valid id>" are ignored.
package flock
