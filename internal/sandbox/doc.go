// Package sandbox defines the sandbox backend seam: a Backend starts a
// Sandbox from a Spec; a Sandbox serves the runner contract
// (internal/runner.Client) to the supervisor and the built-in agent.
//
// Implementations live in sub-packages (host, native) and are
// registered explicitly in sandbox/all. Every implementation passes the
// conformance suite in sandbox/sandboxtest.
//
// A backend must never fall back to less isolation than it names: if it
// cannot start, it fails with a catalog error.
package sandbox
