-- When the per-test results of a build older than the results retention (`harness serve
-- --keep-results`) were expired: its passes and skips are gone from test_results, its failures
-- (with their messages, for the failure clusters and bisection evidence) are kept, and its packed
-- results (build_cells, of the build's current digest: a build without them is never expired) keep
-- every status, which the build page, bisection and the LKG read instead. NULL: all there.
-- Keep in step with ../postgres/0011_results_retention.sql.
ALTER TABLE builds ADD COLUMN results_expired_at BIGINT;
