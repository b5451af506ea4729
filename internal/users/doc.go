// Package users keeps the team server's users, their personal API tokens
// and the quota ledger in the server's database (sqldb, both dialects).
//
// A token is "agr_" and 52 base32 letters of random secret, then a
// 6-letter checksum of them: the prefix lets secret scanners find it, the
// checksum lets them (and the server) tell a token from a typo without a
// database. Only the token's SHA-256 is stored. A slow password hash
// (bcrypt, argon2) protects secrets people choose, which are guessable;
// this one has 256 random bits, which no hash speed makes guessable, and a
// fast hash lets the server find the token by an index on every request
// instead of spending tens of milliseconds comparing hashes one by one.
//
// Quotas are exact under load because a check and the admission it allows
// are one write transaction (Admit): on SQLite write transactions are
// serialised whole, on PostgreSQL the transaction locks the user's row
// first, so two admissions of one user never read the same ledger.
package users
