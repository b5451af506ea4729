ALTER TABLE runs DROP COLUMN supervised;
