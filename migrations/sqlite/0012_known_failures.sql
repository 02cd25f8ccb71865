-- A failed result the build's provider lists as a known failure (`finished.json` metadata
-- `known-failures`) is stored as 'known-failure': its run passed without it, and the grid, the
-- build page and the LKG show it as such. SQLite cannot change a CHECK constraint in place, so
-- the table is rebuilt with the same columns, rows and indexes. Keep in step with
-- ../postgres/0012_known_failures.sql.
CREATE TABLE test_results_new (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    build_id            INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    test_id             INTEGER NOT NULL REFERENCES tests (id),
    status              TEXT NOT NULL CHECK (status IN ('pass', 'fail', 'skip', 'flaky', 'known-failure')),
    duration_seconds    REAL,
    failure_message     TEXT,
    failure_key         TEXT,
    failure_key_version BIGINT
);

INSERT INTO test_results_new (id, build_id, test_id, status, duration_seconds, failure_message, failure_key,
                              failure_key_version)
SELECT id, build_id, test_id, status, duration_seconds, failure_message, failure_key, failure_key_version
FROM test_results;

DROP TABLE test_results;
ALTER TABLE test_results_new RENAME TO test_results;

CREATE INDEX test_results_test_build ON test_results (test_id, build_id);
CREATE INDEX test_results_build ON test_results (build_id);
CREATE INDEX test_results_failed ON test_results (build_id) WHERE status = 'fail';
