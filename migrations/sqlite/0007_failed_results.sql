-- The dashboard's failure clusters read every failed result of the last days: a partial index on
-- the failed results alone finds them without reading the passes and skips (most of a conformance
-- build). Keep in step with ../postgres/0007_failed_results.sql.
CREATE INDEX test_results_failed ON test_results (build_id) WHERE status = 'fail';
