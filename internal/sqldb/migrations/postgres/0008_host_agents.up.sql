-- The agent profiles whose CLI is on an agent host's PATH, as a JSON
-- list, as its last claim named them (written when they change): the
-- server gives it only runs whose profile it has, and says why a run
-- waits when no host has it. NULL: the host has not said (an earlier
-- version), and is given runs of any profile.
ALTER TABLE hosts ADD COLUMN agents TEXT;
