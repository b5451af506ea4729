// Package runner is the program inside every sandbox and its client.
//
// The agentrun binary serves it (hidden subcommand) inside native and docker
// sandboxes; the host backend serves the same ops. One protocol over one
// stream: length-prefixed JSON frames with request ids; a request id runs
// once (a retried id returns the first result); a client whose stream is cut
// reconnects and resumes; commands that were running when the runner
// restarted are reported failed (CodeInterrupted), never re-run.
package runner
