//! Each build's results packed into one row (`build_cells`, migration 0008), for the dashboard's
//! grid: `<test id><status letter>` per result (`12p13f`: p pass, f fail, k flaky, s skip, x known failure),
//! written with the results, in their transaction. A 200-build grid reads 200 such rows rather
//! than 200,000 results. A build whose row is missing, or was packed from other content (its
//! digest is not the build's: replaced by a binary older than the table), has its results read
//! instead: the packed rows are a faster path to the same answer, never another answer.

use std::collections::HashMap;

use sqlx::{Any, Row, Transaction};

use super::{BUILD_COLUMNS, BUILD_FROM, Index, Result};
use crate::record::{BuildInfo, TestStatus};

/// A build of a grid, with its results by test id.
#[derive(Debug, Clone, PartialEq)]
pub struct GridBuild {
    pub info: BuildInfo,
    /// `(test id, status)`, in no particular order.
    pub results: Vec<(i64, TestStatus)>,
}

fn letter(status: TestStatus) -> char {
    match status {
        TestStatus::Pass => 'p',
        TestStatus::Fail => 'f',
        TestStatus::Flaky => 'k',
        TestStatus::Skip => 's',
        TestStatus::KnownFailure => 'x',
    }
}

fn status_of(letter: u8) -> Option<TestStatus> {
    match letter {
        b'p' => Some(TestStatus::Pass),
        b'f' => Some(TestStatus::Fail),
        b'k' => Some(TestStatus::Flaky),
        b's' => Some(TestStatus::Skip),
        b'x' => Some(TestStatus::KnownFailure),
        _ => None,
    }
}

/// A build's results as one row: `(test id, status)` pairs as one text, and the counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packed {
    pub cells: String,
    /// Results that passed or flaked.
    pub passed: i64,
    /// Results that passed, flaked or failed (known failures too).
    pub ran: i64,
}

/// `(test id, status)` pairs as one row.
pub fn pack(results: impl IntoIterator<Item = (i64, TestStatus)>) -> Packed {
    use std::fmt::Write;
    let mut packed = Packed::default();
    for (test, status) in results {
        let _ = write!(packed.cells, "{test}{}", letter(status));
        packed.passed += i64::from(matches!(status, TestStatus::Pass | TestStatus::Flaky));
        packed.ran += i64::from(status != TestStatus::Skip);
    }
    packed
}

/// The pairs of a packed text; `None` when it is not one (the harness never writes such).
pub fn unpack(packed: &str) -> Option<Vec<(i64, TestStatus)>> {
    let mut results = Vec::with_capacity(packed.len() / 5);
    let mut test: Option<i64> = None;
    for byte in packed.bytes() {
        if byte.is_ascii_digit() {
            let digit = i64::from(byte - b'0');
            test = Some(test.unwrap_or(0).checked_mul(10)?.checked_add(digit)?);
        } else {
            results.push((test.take()?, status_of(byte)?));
        }
    }
    test.is_none().then_some(results)
}

impl Index {
    /// Writes (or rewrites) a build's packed results, as packed from its content of `digest`.
    pub(super) async fn write_cells(
        &self,
        tx: &mut Transaction<'_, Any>,
        build_id: i64,
        digest: &str,
        packed: Packed,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO build_cells (build_id, digest, cells, passed_tests, ran_tests) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (build_id) DO UPDATE SET digest = excluded.digest, cells = excluded.cells, \
             passed_tests = excluded.passed_tests, ran_tests = excluded.ran_tests",
        )
        .bind(build_id)
        .bind(digest)
        .bind(packed.cells)
        .bind(packed.passed)
        .bind(packed.ran)
        .execute(&mut **tx)
        .await
        .map_err(self.err("pack the build's results"))?;
        Ok(())
    }

    /// A job's newest `limit` builds, newest first, each with its results by test id (the test
    /// names are read apart, once: see [`Index::test_names`]). One statement reads the builds and
    /// their packed results; builds without an up-to-date packed row have their results read.
    pub async fn grid_builds(&self, job: &str, limit: i64) -> Result<Vec<GridBuild>> {
        let sql = format!(
            "SELECT {BUILD_COLUMNS}, b.id AS row_id, c.cells, c.digest AS cells_digest FROM {BUILD_FROM} \
             LEFT JOIN build_cells c ON c.build_id = b.id \
             WHERE j.name = $1 ORDER BY b.started_at DESC, b.build DESC LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(self.err("list a job's latest builds"))?;
        let mut builds = Vec::with_capacity(rows.len());
        let mut unpacked: Vec<(usize, i64)> = Vec::new();
        for row in &rows {
            let info = self.build_row(row)?;
            let (id, cells, cells_digest): (i64, Option<String>, Option<String>) =
                self.decode(|| Ok((row.try_get("row_id")?, row.try_get("cells")?, row.try_get("cells_digest")?)))?;
            let results = match cells {
                Some(cells) if cells_digest.as_deref() == Some(info.digest.as_str()) => {
                    unpack(&cells).ok_or_else(|| self.bad_value("build_cells.cells", cells))?
                }
                _ => {
                    unpacked.push((builds.len(), id));
                    Vec::new()
                }
            };
            builds.push(GridBuild { info, results });
        }
        if !unpacked.is_empty() {
            self.read_unpacked(&mut builds, &unpacked).await?;
        }
        Ok(builds)
    }

    /// The results of the builds (`(position in builds, row id)`) that have no packed row.
    async fn read_unpacked(&self, builds: &mut [GridBuild], unpacked: &[(usize, i64)]) -> Result<()> {
        // Ids read from the database, as integers: nothing to bind.
        let ids = unpacked.iter().map(|(_, id)| id.to_string()).collect::<Vec<_>>().join(",");
        let sql = format!("SELECT build_id, test_id, status FROM test_results WHERE build_id IN ({ids})");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(&self.pool)
            .await
            .map_err(self.err("list a job's latest results"))?;
        let position: HashMap<i64, usize> = unpacked.iter().map(|(at, id)| (*id, *at)).collect();
        for row in &rows {
            let (build, test, status): (i64, i64, String) =
                self.decode(|| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))?;
            let status = TestStatus::parse(&status).ok_or_else(|| self.bad_value("test_results.status", status))?;
            if let Some(at) = position.get(&build) {
                builds[*at].results.push((test, status));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_results_unpack_to_the_same_pairs_and_anything_else_is_refused() {
        let pairs = vec![
            (1, TestStatus::Pass),
            (12, TestStatus::Fail),
            (9_000_000_001, TestStatus::Flaky),
            (7, TestStatus::Skip),
            (8, TestStatus::KnownFailure),
        ];
        let packed = pack(pairs.clone());
        assert_eq!(packed, Packed { cells: "1p12f9000000001k7s8x".into(), passed: 2, ran: 4 });
        assert_eq!(unpack(&packed.cells), Some(pairs));
        assert_eq!(unpack(""), Some(vec![]));
        for bad in ["12", "p", "12y", "1p2", "99999999999999999999p"] {
            assert_eq!(unpack(bad), None, "{bad:?}");
        }
    }
}
