-- Whether a supervisor has taken the run up (its record's supervisor is
-- set), a copy for List's Taken filter: a server's sweep for the runs a
-- dead supervisor left behind skips the queued runs that wait for a
-- taker in the query, not by decoding each of them.
ALTER TABLE runs ADD COLUMN supervised INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET supervised = 1 WHERE json_type(doc, '$.supervisor') = 'object';
