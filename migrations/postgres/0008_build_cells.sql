-- Each build's results packed into one row, for the dashboard's grid: `<test id><status letter>`
-- per result (p pass, f fail, k flaky, s skip; `12p13f`), written in the transaction that writes
-- the build's results. A 200-build grid then reads 200 rows, not 200,000. `digest` is the
-- builds.digest the row was packed from: a row whose digest is not its build's (a build replaced
-- by a binary that predates this table) is not read, and the results are read instead. And its
-- counts, for the home page's pass-rate sparklines: results that passed (or flaked), that ran
-- (passed, flaked or failed).
-- Keep in step with ../sqlite/0008_build_cells.sql.
CREATE TABLE build_cells (
    build_id     BIGINT PRIMARY KEY REFERENCES builds (id) ON DELETE CASCADE,
    digest       TEXT NOT NULL,
    cells        TEXT NOT NULL,
    passed_tests BIGINT NOT NULL,
    ran_tests    BIGINT NOT NULL
);

-- The builds indexed before: packed from their results.
INSERT INTO build_cells (build_id, digest, cells, passed_tests, ran_tests)
SELECT b.id, b.digest, COALESCE((
    SELECT string_agg(t.test_id::text || CASE t.status WHEN 'pass' THEN 'p' WHEN 'fail' THEN 'f'
                                                      WHEN 'flaky' THEN 'k' ELSE 's' END, '')
    FROM test_results t WHERE t.build_id = b.id), ''),
    (SELECT COUNT(*) FROM test_results t WHERE t.build_id = b.id AND t.status IN ('pass', 'flaky')),
    (SELECT COUNT(*) FROM test_results t WHERE t.build_id = b.id AND t.status IN ('pass', 'flaky', 'fail'))
FROM builds b;
