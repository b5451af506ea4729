// Package cli is the agentrun command line: one file per command, each with
// a constructor, an options struct with Validate, and a plain run function
// that tests call directly. Errors are rendered, and mapped to exit codes,
// only in render.go.
//
// The CLI sees only seams: its Deps (deps.go) are the store, the
// coordinator, the sandbox backends, the agent profiles and the model
// providers that the wiring (internal/wire, via cmd/agentrun) chose. A
// submit is planned by the submit service (internal/submit), whose errors
// name request fields; render.go names them as this command line's flags.
// Runs are started, resumed, cancelled and reconciled through the
// supervisor package's Home.
package cli
