package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentrun/agentrun/internal/audit"
	"github.com/agentrun/agentrun/internal/coord"
	"github.com/agentrun/agentrun/internal/layout"
	"github.com/agentrun/agentrun/internal/queue"
	"github.com/agentrun/agentrun/internal/run"
	"github.com/agentrun/agentrun/internal/supervisor"
	"github.com/agentrun/agentrun/internal/users"
)

// Backend is what a team server runs on: the run store and the
// coordinator on one database, the supervisor's seams over them, and the
// database's health for readiness.
type Backend struct {
	Store run.Store
	Coord coord.Coordinator
	// SupervisorDeps are the supervisor's seams over Store and Coord for
	// runs kept under l.
	SupervisorDeps func(l layout.Layout) supervisor.Deps
	// Ready reports whether the database answers and its schema is
	// current.
	Ready func(ctx context.Context) error
	// Audit is the audit trail on the same database, whose run events
	// Store appends to it.
	Audit audit.Log
	// Users are the users, tokens and quota ledger on the same database.
	Users users.Store
	// Dialect names the database (SQLite or PostgreSQL).
	Dialect string
	// HostsDB and HostLeases keep the agent hosts and the leases held on
	// their behalf (hosts.go), on the same database.
	HostsDB    HostsDB
	HostLeases HostLeases
	// Queue is the dispatch queue on the same database (River).
	Queue queue.Queue
	// Cancels is told of the cancel events Store appends (Hosts.Cancels).
	Cancels *Cancels
	// LeaseTTL is how long a lease outlives its holder's last renewal.
	LeaseTTL time.Duration
	Close    func() error
}

// BackendOptions are how a team server's backend is opened.
type BackendOptions struct {
	// LeaseTTL is the coordinator's (0: its default).
	LeaseTTL time.Duration
	// Log is the server's log: the dispatch queue's own warnings and
	// errors go there (nil: nowhere).
	Log *slog.Logger
}
