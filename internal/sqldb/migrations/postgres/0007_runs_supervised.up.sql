-- Whether a supervisor has taken the run up (its record's supervisor is
-- set), a copy for List's Taken filter: a server's sweep for the runs a
-- dead supervisor left behind skips the queued runs that wait for a
-- taker in the query, not by decoding each of them. PostgreSQL's json
-- refuses the \u0000 escape a task text may hold; it becomes \u0001 for
-- the look (a change of one hex digit, which keeps the text JSON).
ALTER TABLE runs ADD COLUMN supervised BOOLEAN NOT NULL DEFAULT false;
UPDATE runs SET supervised = true
    WHERE json_typeof(replace(doc, '\u0000', '\u0001')::json -> 'supervisor') = 'object';
