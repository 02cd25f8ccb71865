-- no-transaction
-- A build is where it lives: its identity is its directory (logs/<job>/<build>, or
-- pr-logs/pull/<org_repo>/<pr>/<job>/<build> for a presubmit), not its job and build id, so a
-- presubmit never overwrites the periodic build of the same id. And claims: the one upload that
-- may write a build directory at a time, taken in the database so replicas of `harness serve`
-- agree. Keep in step with ../postgres/0006_build_identity_and_claims.sql.
--
-- SQLite cannot drop a table's UNIQUE constraint: the table is rebuilt, the documented way
-- (https://www.sqlite.org/lang_altertable.html#otheralter), with foreign keys off so dropping the
-- old table does not cascade to its results. Hence no transaction around the file: the pragma
-- does nothing inside one. The rebuild is one transaction of its own.
-- `builds_new` lists every column of `builds` as the migrations numbered below this one leave it:
-- one of them that adds a column adds it here too.
PRAGMA foreign_keys = OFF;

BEGIN;

CREATE TABLE builds_new (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id             INTEGER NOT NULL REFERENCES jobs (id),
    build              TEXT NOT NULL,
    path               TEXT NOT NULL,
    pull               TEXT,
    state              TEXT NOT NULL CHECK (state IN ('running', 'aborted', 'finished')),
    started_at         BIGINT NOT NULL,
    finished_at        BIGINT,
    passed             INTEGER CHECK (passed IN (0, 1)),
    result             TEXT,
    kubernetes_version TEXT,
    provider_version   TEXT,
    ccm_version        TEXT,
    job_version        TEXT,
    repo_commit        TEXT,
    artifacts_url      TEXT NOT NULL,
    digest             TEXT NOT NULL,
    -- From 0005_build_repos.sql.
    repos              TEXT,
    UNIQUE (job_id, path)
);

INSERT INTO builds_new (id, job_id, build, path, pull, state, started_at, finished_at, passed, result,
                        kubernetes_version, provider_version, ccm_version, job_version, repo_commit,
                        artifacts_url, digest, repos)
SELECT id, job_id, build, path, pull, state, started_at, finished_at, passed, result,
       kubernetes_version, provider_version, ccm_version, job_version, repo_commit, artifacts_url, digest, repos
FROM builds;

DROP TABLE builds;
ALTER TABLE builds_new RENAME TO builds;

-- Latest N builds of a job.
CREATE INDEX builds_job_started ON builds (job_id, started_at DESC);
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
    finished   INTEGER NOT NULL CHECK (finished IN (0, 1)),
    -- When the claim was taken or last renewed (unix seconds).
    claimed_at BIGINT NOT NULL,
    -- When the build was written and indexed; NULL while it is being written.
    done_at    BIGINT
);

COMMIT;

PRAGMA foreign_keys = ON;
