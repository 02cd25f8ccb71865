-- Each finished build's verdict against its provider's LKG policy, judged once from its results
-- (lkg::RunJudge) and kept, so an LKG load reads a row per build instead of every result.
-- `policy` is the digest of the policy as it judged (the required test names it resolved to, how
-- flaky tests count): a policy change makes new rows beside the old ones, and a load reads only the
-- rows of the policies it runs with, so no answer mixes two policies. `digest` is the builds.digest
-- the results were read at: a row whose digest is not its build's is not read. `good` is the
-- verdict of the tests alone (the build's own `passed` still applies); `flaky_tests` the tests.id
-- of each flaky test, space-separated, in the order the build lists them.
-- Keep in step with ../sqlite/0010_build_verdicts.sql.
CREATE TABLE build_verdicts (
    build_id    BIGINT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    policy      TEXT NOT NULL,
    digest      TEXT NOT NULL,
    good        BOOLEAN NOT NULL,
    flaky_tests TEXT NOT NULL,
    PRIMARY KEY (build_id, policy)
);

-- A load reads the rows of its policies.
CREATE INDEX build_verdicts_policy ON build_verdicts (policy);
