-- The run store (internal/store/sqlstore). A run is its JSON record in doc,
-- with copies of what List filters and orders by in columns of their own;
-- seq and version are the columns' (the store keeps doc in step).
CREATE TABLE run_counter (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
INSERT INTO run_counter (id, seq) VALUES (1, 0);
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    state TEXT NOT NULL,
    repo TEXT NOT NULL,
    version INTEGER NOT NULL,
    last_event INTEGER NOT NULL DEFAULT 0,
    doc TEXT NOT NULL
);
CREATE INDEX runs_state_seq ON runs (state, seq);
CREATE INDEX runs_repo_seq ON runs (repo, seq);
-- The journal: one row per event, seq 1, 2, ... per run.
CREATE TABLE run_events (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
