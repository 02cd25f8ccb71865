-- A counter per job, bumped in the transaction that inserts or replaces one of its builds: the
-- dashboard keeps each job's rendered grid until it changes, checking one row per request.
-- Keep in step with ../sqlite/0003_job_generation.sql.
ALTER TABLE jobs ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
