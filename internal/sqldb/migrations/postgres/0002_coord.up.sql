-- The coordinator (internal/coord/sqlcoord). Times are microseconds since
-- the Unix epoch on the database's clock.
--
-- A lease per run that was ever acquired: token counts acquisitions up and
-- is never reset; holder is the coordinator holding it (NULL: released),
-- until expires_at unless the holder renews it.
CREATE TABLE coord_leases (
    run_id TEXT COLLATE "C" PRIMARY KEY,
    token BIGINT NOT NULL,
    holder TEXT,
    expires_at BIGINT
);
CREATE INDEX coord_leases_holder ON coord_leases (holder);
-- Runs waiting for a slot, in seq order; an entry counts while the lease
-- that made it (token) is held.
CREATE TABLE coord_queue (
    seq BIGINT NOT NULL,
    run_id TEXT COLLATE "C" NOT NULL,
    token BIGINT NOT NULL,
    PRIMARY KEY (seq, run_id)
);
-- Concurrency slot k, taken by holder for run_id until expires_at; gen
-- counts takes up, so releasing an old take never frees a newer one.
CREATE TABLE coord_slots (
    k INTEGER PRIMARY KEY,
    gen BIGINT NOT NULL DEFAULT 0,
    holder TEXT,
    run_id TEXT COLLATE "C",
    expires_at BIGINT
);
CREATE INDEX coord_slots_holder ON coord_slots (holder);
