//! Results retention (`harness serve --keep-results`, migration 0011): the per-test result rows of
//! builds older than the retention are expired, but never what matters. A build stays, with its
//! verdicts, its failed, known-failed and flaky results (their messages feed the failure clusters, the flaky
//! tests and bisection) and its packed
//! results (`build_cells`), which keep every status: the build page, bisection and the LKG read
//! those instead. Only builds whose packed results are of their current content are expired, so no
//! status is ever lost. The store's objects are never touched.

use std::collections::{HashMap, VecDeque};

use sqlx::Row;

use super::{Index, NAMED_BUILD, Result, packed_cells, row_list};
use crate::record::{TestResult, TestStatus};

/// Builds whose results one transaction of [`Index::expire_results`] expires.
const EXPIRED_PER_TRANSACTION: i64 = 100;

/// What [`Index::expire_results`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    pub builds: u64,
    /// Result rows deleted.
    pub results: u64,
}

impl Index {
    /// Expires the passes and skips of the builds (not running) started before `started_before`
    /// (epoch seconds), a hundred builds a transaction, and marks them expired at `now`.
    pub async fn expire_results(&self, started_before: i64, now: i64) -> Result<Expired> {
        let mut expired = Expired::default();
        loop {
            let mut tx = self.pool.begin().await.map_err(self.err("begin a transaction"))?;
            // A write first, so SQLite writers queue on its lock; Postgres locks the rows marked.
            let marked = sqlx::query(
                "UPDATE builds SET results_expired_at = $1 WHERE id IN (SELECT b.id FROM builds b \
                 JOIN build_cells c ON c.build_id = b.id AND c.digest = b.digest \
                 WHERE b.started_at < $2 AND b.results_expired_at IS NULL AND b.state <> 'running' \
                 ORDER BY b.id LIMIT $3) RETURNING id",
            )
            .bind(now)
            .bind(started_before)
            .bind(EXPIRED_PER_TRANSACTION)
            .fetch_all(&mut *tx)
            .await
            .map_err(self.err("mark builds whose results expire"))?;
            if marked.is_empty() {
                return Ok(expired);
            }
            let ids: Vec<i64> = marked.iter().map(|r| self.decode(|| r.try_get(0))).collect::<Result<_>>()?;
            let list = row_list(&ids);
            let sql = format!("DELETE FROM test_results WHERE build_id IN ({list}) AND status IN ('pass', 'skip')");
            let deleted = sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut *tx)
                .await
                .map_err(self.err("expire results"))?
                .rows_affected();
            tx.commit().await.map_err(self.err("commit the expiry"))?;
            expired.builds += ids.len() as u64;
            expired.results += deleted;
        }
    }

    /// The build's row, and whether its results were expired; `None` when there is no such build.
    pub(super) async fn named_build_row(&self, job: &str, build: &str) -> Result<Option<(i64, bool)>> {
        let sql = format!("SELECT b.id, b.results_expired_at FROM builds b WHERE b.id = {NAMED_BUILD}");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job)
            .bind(build)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("find a build"))?;
        row.map(|r| self.decode(|| Ok((r.try_get(0)?, r.try_get::<Option<i64>, _>(1)?.is_some())))).transpose()
    }

    /// An expired build's results as they were indexed, from its packed results and the failed and
    /// flaky results kept: every status, in the build's order; durations and messages of those kept.
    pub(super) async fn expired_build_results(&self, build: i64) -> Result<Vec<TestResult>> {
        let packed = sqlx::query(
            "SELECT c.cells FROM build_cells c JOIN builds b ON b.id = c.build_id AND c.digest = b.digest \
             WHERE c.build_id = $1",
        )
        .bind(build)
        .fetch_optional(&self.pool)
        .await
        .map_err(self.err("read a build's packed results"))?;
        let cells: String = match packed {
            Some(row) => self.decode(|| row.try_get(0))?,
            None => String::new(),
        };
        let packed = packed_cells::unpack(&cells).ok_or_else(|| self.bad_value("build_cells.cells", cells.clone()))?;
        let kept = sqlx::query(
            "SELECT t.test_id, te.suite, te.name, t.status, t.duration_seconds, t.failure_message \
             FROM test_results t JOIN tests te ON te.id = t.test_id WHERE t.build_id = $1 ORDER BY t.id",
        )
        .bind(build)
        .fetch_all(&self.pool)
        .await
        .map_err(self.err("list a build's kept results"))?;
        let mut failures: HashMap<i64, VecDeque<TestResult>> = HashMap::new();
        for row in &kept {
            let test: i64 = self.decode(|| row.try_get(0))?;
            failures.entry(test).or_default().push_back(self.test_result(row, 1)?);
        }
        let mut ids: Vec<i64> = packed.iter().map(|(test, _)| *test).collect();
        ids.sort_unstable();
        ids.dedup();
        let names: HashMap<i64, (String, String)> =
            self.test_names(&ids).await?.into_iter().map(|(id, suite, name)| (id, (suite, name))).collect();
        let mut results = Vec::with_capacity(packed.len());
        for (test, status) in packed {
            let kept = match status {
                TestStatus::Fail | TestStatus::Flaky | TestStatus::KnownFailure => {
                    failures.get_mut(&test).and_then(VecDeque::pop_front)
                }
                TestStatus::Pass | TestStatus::Skip => None,
            };
            let result = kept.unwrap_or_else(|| {
                let (suite, name) = names.get(&test).cloned().unwrap_or_default();
                TestResult { suite, name, status, duration_seconds: None, message: None }
            });
            results.push(result);
        }
        Ok(results)
    }
}
