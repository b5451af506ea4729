// Package bootid names the running boot of the machine, so that what a
// process left unsynced on disk (a cached layer, a spare copy) is known
// for what it is after a crash and a reboot: from an earlier boot.
package bootid

import "sync"

// ID is the running boot's name, read once (a process lives in one
// boot); "" where the system does not say, and then nothing can be known
// to be of this boot.
var ID = sync.OnceValue(read)
