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
    -- NULL until a build of the job names its provider (finished.json's metadata.provider).
    provider_id INTEGER REFERENCES providers (id)
);

CREATE TABLE builds (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id             INTEGER NOT NULL REFERENCES jobs (id),
    -- The <build> of logs/<job>/<build>/ (Prow's BUILD_ID); text, since only its job gives it meaning.
    build              TEXT NOT NULL,
    -- The build directory relative to the store root: logs/<job>/<build> or pr-logs/pull/...
    path               TEXT NOT NULL,
    pull               TEXT,
    -- running (no finished.json yet), aborted (none, and the build is over), finished.
    state              TEXT NOT NULL CHECK (state IN ('running', 'aborted', 'finished')),
    started_at         BIGINT NOT NULL,
    finished_at        BIGINT,
    -- NULL while running, when aborted, or when finished.json could not be read.
    -- INTEGER 0/1 rather than BOOLEAN: sqlx's Any driver decodes SQLite's BOOLEAN affinity to nothing.
    passed             INTEGER CHECK (passed IN (0, 1)),
    result             TEXT,
    kubernetes_version TEXT,
    provider_version   TEXT,
    ccm_version        TEXT,
    job_version        TEXT,
    repo_commit        TEXT,
    -- The build directory in the object store: gs://, s3:// or file:// URL.
    artifacts_url      TEXT NOT NULL,
    -- SHA-256 of what the row was read from: indexing the same build again changes nothing.
    digest             TEXT NOT NULL,
    UNIQUE (job_id, build)
);

-- Latest N builds of a job.
CREATE INDEX builds_job_started ON builds (job_id, started_at DESC);

-- Each test once: results refer to it by id, so the per-test index stays small (a test's name is
-- ~150 bytes; thousands of them recur in every build of a conformance job).
CREATE TABLE tests (
    id    INTEGER PRIMARY KEY AUTOINCREMENT,
    suite TEXT NOT NULL,
    name  TEXT NOT NULL,
    UNIQUE (name, suite)
);

CREATE TABLE test_results (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    build_id         INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    test_id          INTEGER NOT NULL REFERENCES tests (id),
    status           TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'skip', 'flaky')),
    duration_seconds REAL,
    failure_message  TEXT
);

-- All results of one test across builds.
CREATE INDEX test_results_test_build ON test_results (test_id, build_id);
-- All results of one build, and the cascade when a build is deleted.
CREATE INDEX test_results_build ON test_results (build_id);

-- Files of a build that could not be read (a broken JUnit file, a finished.json of the wrong shape).
CREATE TABLE build_problems (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    build_id INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    file     TEXT NOT NULL,
    message  TEXT NOT NULL
);

CREATE INDEX build_problems_build ON build_problems (build_id);
