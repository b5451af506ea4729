-- The audit trail (internal/audit/sqlaudit): a hash chain of entries,
-- seq 1, 2, ..., each carrying the hash of the one before; audit_head is
-- the last entry's seq and hash, and its row is the lock that serialises
-- appends. Checkpoints seal the chain up to their seq with the server's
-- signature. No foreign keys: the trail outlives the runs it names.
CREATE TABLE audit_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL
);
INSERT INTO audit_head (id, seq, hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
CREATE TABLE audit_entries (
    seq INTEGER PRIMARY KEY,
    time TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    run_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX audit_entries_run ON audit_entries (run_id, seq);
CREATE TABLE audit_checkpoints (
    seq INTEGER PRIMARY KEY,
    hash TEXT NOT NULL,
    time TEXT NOT NULL,
    key TEXT NOT NULL,
    signature TEXT NOT NULL
);
