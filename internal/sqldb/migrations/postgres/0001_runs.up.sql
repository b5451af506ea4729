-- The run store (internal/store/sqlstore). A run is its JSON record in doc,
-- with copies of what List filters and orders by in columns of their own;
-- seq and version are the columns' (the store keeps doc in step). doc is
-- TEXT, not JSONB: the record comes back byte for byte, and JSONB refuses
-- the \u0000 escape a task text may hold.
CREATE SEQUENCE run_seq AS BIGINT;
-- ids sort and compare as bytes (COLLATE "C"), so a prefix is a range.
CREATE TABLE runs (
    id TEXT COLLATE "C" PRIMARY KEY,
    seq BIGINT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    repo TEXT NOT NULL,
    version BIGINT NOT NULL,
    last_event BIGINT NOT NULL DEFAULT 0,
    doc TEXT NOT NULL
);
CREATE INDEX runs_state_seq ON runs (state, seq);
CREATE INDEX runs_repo_seq ON runs (repo, seq);
-- The journal: one row per event, seq 1, 2, ... per run.
CREATE TABLE run_events (
    run_id TEXT COLLATE "C" NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    type TEXT NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
