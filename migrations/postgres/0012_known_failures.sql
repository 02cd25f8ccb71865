-- A failed result the build's provider lists as a known failure (`finished.json` metadata
-- `known-failures`) is stored as 'known-failure': its run passed without it, and the grid, the
-- build page and the LKG show it as such. Keep in step with ../sqlite/0012_known_failures.sql
-- (which rebuilds the table: SQLite cannot change a CHECK constraint in place).
ALTER TABLE test_results DROP CONSTRAINT test_results_status_check;
ALTER TABLE test_results ADD CONSTRAINT test_results_status_check
    CHECK (status IN ('pass', 'fail', 'skip', 'flaky', 'known-failure'));
