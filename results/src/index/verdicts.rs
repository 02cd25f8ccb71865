//! Each finished build's LKG verdict, kept per policy (`build_verdicts`, migration 0010): an LKG
//! load reads a row per build instead of every result ([`crate::known_good`]). A verdict is judged
//! from the build's packed results (`build_cells`), which carry the digest of the content they were
//! packed from, so every stored verdict names exactly the content it was judged from; a load reads
//! only the verdicts whose digest is still their build's.

use sqlx::Row;

use super::{Backend, Index, Result, get_bool, packed_cells, placeholders, row_list};
use crate::record::TestStatus;

/// A build's verdict under one policy, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVerdict {
    /// The build's row.
    pub build: i64,
    /// The builds.digest of the content it was judged from.
    pub digest: String,
    /// The verdict of its tests alone.
    pub good: bool,
    /// The tests.id of each flaky test, in the order the build lists them.
    pub flaky_tests: Vec<i64>,
}

/// A build's results as packed when it was indexed, with the digest of that content.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedResults {
    pub build: i64,
    pub digest: String,
    /// `(test id, status)` in the order the build lists them.
    pub results: Vec<(i64, TestStatus)>,
}

/// Builds whose packed results one statement of [`Index::packed_results`] reads: a conformance
/// build's row is ~20 KB, so a few MB a statement.
const PACKED_BUILDS_PER_QUERY: usize = 200;

/// Verdict rows one statement writes (5 binds each).
const fn verdicts_per_statement(backend: Backend) -> usize {
    match backend {
        Backend::Sqlite => 50,
        Backend::Postgres => 1000,
    }
}

impl Index {
    /// The verdicts stored under `policy` whose digest is still their build's: of every build,
    /// or (`only`) of the builds named.
    pub async fn lkg_verdicts(&self, policy: &str, only: Option<&[i64]>) -> Result<Vec<StoredVerdict>> {
        const SELECT: &str = "SELECT v.build_id, v.digest, v.good, v.flaky_tests FROM build_verdicts v \
                              JOIN builds b ON b.id = v.build_id AND b.digest = v.digest WHERE v.policy = $1";
        let statements: Vec<String> = match only {
            None => vec![SELECT.to_owned()],
            Some(rows) => rows
                .chunks(PACKED_BUILDS_PER_QUERY)
                .map(|chunk| {
                    let ids = row_list(chunk);
                    format!("{SELECT} AND v.build_id IN ({ids})")
                })
                .collect(),
        };
        let mut verdicts = Vec::new();
        for sql in statements {
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(policy)
                .fetch_all(&self.pool)
                .await
                .map_err(self.err("list stored verdicts"))?;
            for r in &rows {
                verdicts.push(self.stored_verdict(r)?);
            }
        }
        Ok(verdicts)
    }

    fn stored_verdict(&self, r: &sqlx::any::AnyRow) -> Result<StoredVerdict> {
        let flaky: String = self.decode(|| r.try_get(3))?;
        let flaky_tests = flaky
            .split_ascii_whitespace()
            .map(|id| id.parse().map_err(|_| self.bad_value("build_verdicts.flaky_tests", flaky.clone())))
            .collect::<Result<_>>()?;
        Ok(StoredVerdict {
            build: self.decode(|| r.try_get(0))?,
            digest: self.decode(|| r.try_get(1))?,
            good: self.decode(|| get_bool(r, "good"))?.unwrap_or(false),
            flaky_tests,
        })
    }

    /// Stores verdicts judged under `policy`, replacing a build's verdict judged from other
    /// content. Verdicts of builds no longer in the index are dropped.
    pub async fn store_verdicts(&self, policy: &str, verdicts: &[StoredVerdict]) -> Result<()> {
        for batch in verdicts.chunks(verdicts_per_statement(self.backend)) {
            // The join drops the rows of builds deleted since they were judged; `WHERE true` tells
            // SQLite the `ON CONFLICT` is the upsert's, not the join's.
            let sql = format!(
                "INSERT INTO build_verdicts (build_id, policy, digest, good, flaky_tests) \
                 SELECT v.column1, v.column2, v.column3, v.column4, v.column5 FROM (VALUES {}) AS v \
                 JOIN builds b ON b.id = v.column1 WHERE true \
                 ON CONFLICT (build_id, policy) DO UPDATE SET digest = excluded.digest, good = excluded.good, \
                 flaky_tests = excluded.flaky_tests WHERE build_verdicts.digest <> excluded.digest",
                placeholders(batch.len(), 5)
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for verdict in batch {
                let flaky = verdict.flaky_tests.iter().map(i64::to_string).collect::<Vec<_>>().join(" ");
                query = query.bind(verdict.build).bind(policy).bind(&verdict.digest).bind(verdict.good).bind(flaky);
            }
            query.execute(&self.pool).await.map_err(self.err("store verdicts"))?;
        }
        Ok(())
    }

    /// The packed results of the builds `rows`, each with the digest it was packed at; builds
    /// with no packed row (or one that cannot be read) are left out: read their results instead.
    pub async fn packed_results(&self, rows: &[i64], mut visit: impl FnMut(PackedResults)) -> Result<()> {
        for chunk in rows.chunks(PACKED_BUILDS_PER_QUERY) {
            let ids = row_list(chunk);
            let sql = format!("SELECT build_id, digest, cells FROM build_cells WHERE build_id IN ({ids})");
            let mut stream = sqlx::query(sqlx::AssertSqlSafe(sql)).fetch(&self.pool);
            while let Some(row) =
                futures::TryStreamExt::try_next(&mut stream).await.map_err(self.err("read packed results"))?
            {
                let (build, digest, cells): (i64, String, &str) =
                    self.decode(|| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))?;
                if let Some(results) = packed_cells::unpack(cells) {
                    visit(PackedResults { build, digest, results });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
impl Index {
    /// Drops every stored verdict, so the next load judges every build again.
    pub(crate) async fn forget_verdicts(&self) {
        sqlx::query("DELETE FROM build_verdicts").execute(&self.pool).await.unwrap();
    }
}
