// Package users is the team server's users, their roles, personal API
// tokens and quotas: the types, the rules that need no database (token
// format, scopes, the quota decision), and the Store seam that keeps
// them (implemented on the server's SQL database by sqlusers).
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
// Quotas must be exact under load: a Store checks a user's ledger
// (Decide) and records the admission in one serialised step (Admit).
package users
