-- Agent hosts that join the team server (internal/server/hosts*.go).
-- Times are microseconds since the Unix epoch on the database's clock.
--
-- An enrolled host: its credential is kept only as a SHA-256 hash;
-- revoked_at set: its requests are refused.
CREATE TABLE hosts (
    id TEXT COLLATE "C" PRIMARY KEY,
    name TEXT NOT NULL,
    labels TEXT NOT NULL,
    backends TEXT NOT NULL,
    slots INTEGER NOT NULL,
    secret_hash TEXT NOT NULL,
    enrolled_at BIGINT NOT NULL,
    last_seen BIGINT,
    revoked_at BIGINT
);
-- One-time enrolment tokens, by hash: used_at set once exchanged.
CREATE TABLE host_enrol_tokens (
    hash TEXT COLLATE "C" PRIMARY KEY,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    host_id TEXT
);
-- Every claim of a run by a host: the lease's fencing token, when the
-- host claimed it and when (and how) the host's hold ended. A row with no
-- ended_at is a run the host executes now.
CREATE TABLE host_claims (
    run_id TEXT COLLATE "C" NOT NULL,
    token BIGINT NOT NULL,
    host_id TEXT COLLATE "C" NOT NULL,
    claimed_at BIGINT NOT NULL,
    ended_at BIGINT,
    outcome TEXT,
    PRIMARY KEY (run_id, token)
);
CREATE INDEX host_claims_host ON host_claims (host_id, ended_at);
