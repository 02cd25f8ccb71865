-- Each failure's message normalised as the failure clusters group them (dashboards::failures::
-- normalise), kept when the build is indexed with the version of the normaliser that made it: the
-- clusters page then masks no message at all. NULL for the failures indexed before, and for those
-- of no message; a failure whose key is missing or of another version is normalised when read.
-- Keep in step with ../postgres/0009_failure_keys.sql.
ALTER TABLE test_results ADD COLUMN failure_key TEXT;
ALTER TABLE test_results ADD COLUMN failure_key_version BIGINT;
