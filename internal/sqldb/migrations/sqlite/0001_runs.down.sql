DROP TABLE run_events;
DROP TABLE runs;
DROP TABLE run_counter;
