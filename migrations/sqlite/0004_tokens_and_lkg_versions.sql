-- Publish tokens of the ingestion API (POST /api/v1/builds), each bound to one provider. Only a
-- token's SHA-256 is kept: the token is shown once, when `harness token create` makes it.
-- Keep in step with ../postgres/0004_tokens_and_lkg_versions.sql.
CREATE TABLE tokens (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    provider    TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    -- NULL while the token is valid.
    revoked_at  BIGINT
);

-- The LKG answers as computed from each generation of the index (the sum of jobs.generation),
-- written by one replica at a time under an advisory lock and only ever forward, so replicas of
-- `harness serve` never record conflicting answers.
CREATE TABLE lkg_versions (
    generation  BIGINT PRIMARY KEY,
    computed_at BIGINT NOT NULL,
    -- The LKG report (GET /api/v1/lkg) as JSON.
    report      TEXT NOT NULL
);
