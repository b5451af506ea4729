DROP TABLE audit_checkpoints;
DROP TABLE audit_entries;
DROP TABLE audit_head;
