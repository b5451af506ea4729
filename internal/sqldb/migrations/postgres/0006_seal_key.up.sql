-- An agent host's public sealing key (internal/seal), base64: the server
-- seals the values a run needs (its provider keys) to it in a claim.
-- NULL: a host enrolled before sealing keys; it registers one, once, at
-- its next start.
ALTER TABLE hosts ADD COLUMN seal_key TEXT;
