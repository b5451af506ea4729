-- Users, their API tokens and the quota ledger (internal/users). Times
-- are microseconds since the Unix epoch.
--
-- A user: name is what people type; role is admin, member or viewer;
-- limits are the admin's overrides of the server's default quotas (JSON,
-- '{}' for none).
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    limits TEXT NOT NULL DEFAULT '{}'
);
-- A personal API token. Only the SHA-256 of the token is kept (hash, hex):
-- the token itself is shown once, when it is made.
CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    last_used_at INTEGER,
    revoked_at INTEGER
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);
-- The quota ledger: one row per admission of a run (its submit, each
-- resume). run_id is NULL between the admission and the run's creation;
-- base_* is the run's usage when admitted, budget_* what the admission may
-- spend (0: unbounded); used_* is fixed once a later admission of the same
-- run supersedes this one (NULL: read the run's usage).
CREATE TABLE quota_ledger (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    run_id TEXT,
    kind TEXT NOT NULL,
    at INTEGER NOT NULL,
    base_tokens INTEGER NOT NULL DEFAULT 0,
    base_cost REAL NOT NULL DEFAULT 0,
    budget_tokens INTEGER NOT NULL DEFAULT 0,
    budget_cost REAL NOT NULL DEFAULT 0,
    used_tokens INTEGER,
    used_cost REAL
);
CREATE INDEX quota_ledger_user_at ON quota_ledger (user_id, at);
CREATE INDEX quota_ledger_run ON quota_ledger (run_id);
