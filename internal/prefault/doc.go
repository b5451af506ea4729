// Package prefault makes the next few MiB of the Go heap resident when a
// process of the agentrun binary starts, with one system call per 256 KiB
// (madvise MADV_POPULATE_WRITE, Linux 5.14), instead of one page fault per
// 4 KiB page as the package initializers and the command first touch them.
//
// A process of the binary faults about 1,200 pages in before its main
// returns from `agentrun version`, half of them in the heap. Where a page
// fault is dear (on a paravirtualized guest a fault costs 10-20 µs, and a
// page made resident by madvise 1-2 µs: BenchmarkFirstTouch), that is a
// large part of each start, and a submit's run starts three such
// processes one after the other (the CLI, the supervisor, the sandbox's
// init).
//
// Where faults are cheap (a fault costs about what madvise costs a page),
// making pages resident that the process never touches costs more than
// the faults it saves: 0.3-0.5 ms of each start, measured on such a
// machine. So the initializer makes the first 256 KiB resident (the heap
// reaches them in any process) and times it against one first touch of
// the next page; only where the fault costs at least dear times as much
// does it go on to the rest of the span.
//
// The range starts at a heap object allocated by the initializer and ends
// at most Span later or where the heap's mapping ends (the runtime maps
// its heap 4 MiB at a time; the last call is halved until it fits): it is
// memory the runtime has mapped for the heap and will hand out next. It
// stays resident whether or not it is used: at most Span more resident
// memory per process.
//
// Package main imports it for its initializer alone. It imports nothing
// but syscall and unsafe, so that its initializer runs among the first
// (right after package os's), before those of the libraries, which touch
// most of the heap.
package prefault
