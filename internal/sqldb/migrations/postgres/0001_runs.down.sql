DROP TABLE run_events;
DROP TABLE runs;
DROP SEQUENCE run_seq;
