// Package run is the domain of AgentRun: a Run, its Attempts and Checks, its
// states and reasons, the events of its journal, and the Store interface that
// every run store implements.
//
// This package imports none of its implementations. Stores live under
// internal/store, and every one of them passes internal/store/storetest.
//
// The state machine (enforced by Transition callers through CompareAndSet):
//
//	submit ──> queued ──> preparing ──> running ──> checking ──> exporting ──> succeeded
//	             │            │            │  ^          │            │
//	             │            │            │  └──────────┘ checks fail, attempts left
//	             └────────────┴────────────┴─────────────┴────────────┴──> failed | cancelled | interrupted
//
// interrupted and failed runs may be resumed: they go back to queued with a
// new attempt.
package run
