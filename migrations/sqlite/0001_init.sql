-- The SQL index of published builds (SQLite). Keep in step with ../postgres/0001_init.sql.
-- Timestamps are epoch seconds (UTC), as in started.json/finished.json, so both dialects decode to i64.
-- Foreign keys need `PRAGMA foreign_keys = ON`, which sqlx's SQLite driver sets by default.

CREATE TABLE providers (
    id   INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE
);

CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL UNIQUE,
    provider_id INTEGER NOT NULL REFERENCES providers (id)
);

CREATE TABLE builds (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id             INTEGER NOT NULL REFERENCES jobs (id),
    -- The <build> of logs/<job>/<build>/ (Prow's BUILD_ID); text, since only its job gives it meaning.
    build              TEXT NOT NULL,
    started_at         BIGINT NOT NULL,
    finished_at        BIGINT,
    -- NULL while running, or when the build was killed before writing finished.json.
    passed             BOOLEAN CHECK (passed IN (0, 1)),
    result             TEXT,
    kubernetes_version TEXT,
    provider_version   TEXT,
    ccm_version        TEXT,
    job_version        TEXT,
    repo_commit        TEXT,
    -- The build directory in the object store: gs://, s3:// or file:// URL.
    artifacts_url      TEXT NOT NULL,
    UNIQUE (job_id, build)
);

-- Latest N builds of a job.
CREATE INDEX builds_job_started ON builds (job_id, started_at DESC);

CREATE TABLE test_results (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    build_id         INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    suite            TEXT NOT NULL,
    name             TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'skip', 'flaky')),
    duration_seconds REAL,
    failure_message  TEXT
);

-- All results of one test across builds.
CREATE INDEX test_results_name_build ON test_results (name, build_id);
-- All results of one build, and the cascade when a build is deleted.
CREATE INDEX test_results_build ON test_results (build_id);
