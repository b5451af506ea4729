DROP TABLE host_claims;
DROP TABLE host_enrol_tokens;
DROP TABLE hosts;
