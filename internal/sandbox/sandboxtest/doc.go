// Package sandboxtest is the conformance suite of the sandbox seam: Run
// exercises every op of runner.Client against a sandbox of one backend on a
// fresh fixture workspace and, on a twin fixture, against the host backend,
// and expects the same outcomes (after normalising what legitimately
// differs: the workspace's path as processes see it, modification times,
// directory sizes).
//
// Every backend's tests call Run in a few lines, and Bench, which measures
// the hot operations (Start+Destroy, Exec, WriteFile and ReadFile) the same
// way for every backend. The suite never skips an op: a backend that
// cannot serve one fails.
package sandboxtest
