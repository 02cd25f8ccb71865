-- The suites each build has results of, for the dashboard's per-suite tables (`/suite/{suite}`):
-- a suite's builds found here, not by reading every result of the suite (a conformance suite's
-- are most of test_results). Written in the transaction that writes the build's results.
-- Keep in step with ../postgres/0013_build_suites.sql.
CREATE TABLE build_suites (
    suite    TEXT NOT NULL,
    build_id INTEGER NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    PRIMARY KEY (suite, build_id)
);

-- A build's rows, for the cascade when it is deleted and when it is replaced.
CREATE INDEX build_suites_build ON build_suites (build_id);

-- The results that say something (a failure's message, a skip's reason), per build: a suite's
-- table reads them beside the packed results, without reading a conformance build's thousands of
-- silent passes and skips.
CREATE INDEX test_results_said ON test_results (build_id) WHERE failure_message IS NOT NULL;

-- The builds indexed before. (A build whose passes and skips have expired keeps the suites of its
-- failures only; the tables leave such builds out.)
INSERT INTO build_suites (suite, build_id)
SELECT DISTINCT te.suite, t.build_id FROM test_results t JOIN tests te ON te.id = t.test_id;
