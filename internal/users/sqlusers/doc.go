// Package sqlusers keeps the team server's users, their personal API
// tokens and the quota ledger (users.Store) in the server's database
// (sqldb, both dialects; migration 0004_users).
//
// Admit is exact under load because the check and the admission it allows
// are one write transaction: on SQLite write transactions are serialised
// whole, on PostgreSQL the transaction locks the user's row first, so two
// admissions of one user never read the same ledger.
package sqlusers
