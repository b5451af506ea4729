DROP TABLE quota_ledger;
DROP TABLE api_tokens;
DROP TABLE users;
