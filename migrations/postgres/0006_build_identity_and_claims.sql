-- A build is where it lives: its identity is its directory (logs/<job>/<build>, or
-- pr-logs/pull/<org_repo>/<pr>/<job>/<build> for a presubmit), not its job and build id, so a
-- presubmit never overwrites the periodic build of the same id. And claims: the one upload that
-- may write a build directory at a time, taken in the database so replicas of `harness serve`
-- agree. Keep in step with ../sqlite/0006_build_identity_and_claims.sql.
ALTER TABLE builds DROP CONSTRAINT builds_job_id_build_key;
ALTER TABLE builds ADD CONSTRAINT builds_job_id_path_key UNIQUE (job_id, path);

-- A build by job and build id (the dashboard's /job/<job>/build/<build>).
CREATE INDEX builds_job_build ON builds (job_id, build);

-- Who writes a build directory: at most one upload's content at a time. A claim is taken before
-- anything is written (the first insert wins), renewed while its writer works, and done once the
-- build is written and indexed. A claim not renewed for a while is taken over (its writer died).
CREATE TABLE build_claims (
    -- The build directory, as builds.path.
    path       TEXT PRIMARY KEY,
    -- SHA-256 of the claiming upload's files: the same content may write again (a retry).
    digest     TEXT NOT NULL,
    -- Whether that upload holds finished.json: a finished build is never replaced.
    finished   BOOLEAN NOT NULL,
    -- When the claim was taken or last renewed (unix seconds).
    claimed_at BIGINT NOT NULL,
    -- When the build was written and indexed; NULL while it is being written.
    done_at    BIGINT
);
