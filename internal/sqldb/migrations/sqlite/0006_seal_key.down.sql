ALTER TABLE hosts DROP COLUMN seal_key;
