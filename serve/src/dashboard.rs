//! The dashboard's data (`dashboards::web::Source`): builds and results from the SQL index, files
//! from the object store, and the LKG answers `harness serve` keeps loaded. A store that fails is
//! logged with its error and answered without it: no page shows where the store is.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use dashboards::grid::{Cell, Column, GridData, ResultRow, TestName};
use dashboards::matrix::MatrixBuild;
use dashboards::suite_table::{SuiteBuild, SuiteResult, newest_per_column};
use dashboards::trends::{JobTrend, Point};
use dashboards::web::{Artifact, BuildView, JobSummary, LogTail, Source, SourceError};
use failures::Failure;

use results::index::{Index, IndexError, VersionedBuild};
use results::layout::RUNNER_SUITE;
use results::record::{BuildInfo, State, TestResult, TestStatus};
use results::store::{ResultStore, StoreError};

/// How much of `build-log.txt` a build page shows.
const LOG_TAIL_BYTES: u64 = 16 * 1024;

pub struct IndexSource {
    pub index: Index,
    pub store: ResultStore,
    pub snapshots: lkg::api::Snapshots,
    /// Provider (and `kubernetes`) → its repository's web URL.
    pub repos: BTreeMap<String, String>,
    /// Test names by id, read once each: a grid's results name their tests by id.
    pub test_names: Mutex<HashMap<i64, TestName>>,
}

fn matrix_build(build: VersionedBuild) -> MatrixBuild {
    let VersionedBuild { provider, job, build, kubernetes_version, provider_version, started_at, passed } = build;
    MatrixBuild { provider, job, build, kubernetes_version, provider_version, started_at, passed }
}

#[async_trait]
impl Source for IndexSource {
    async fn jobs(&self) -> Result<Vec<JobSummary>, SourceError> {
        let jobs = self.index.jobs().await.map_err(index_error)?;
        Ok(jobs.into_iter().map(|(job, provider)| JobSummary { job, provider }).collect())
    }

    async fn matrix(&self) -> Result<Vec<MatrixBuild>, SourceError> {
        let builds = self.index.matrix_builds().await.map_err(index_error)?;
        Ok(builds.into_iter().map(matrix_build).collect())
    }

    async fn suites(&self) -> Result<Vec<String>, SourceError> {
        let mut suites = self.index.suites().await.map_err(index_error)?;
        suites.retain(|suite| suite != RUNNER_SUITE);
        Ok(suites)
    }

    async fn suite(&self, suite: &str) -> Result<Vec<SuiteBuild>, SourceError> {
        let builds = self.index.suite_builds(suite).await.map_err(index_error)?;
        let newest = newest_per_column(builds.into_iter().map(|(id, b)| (id, matrix_build(b))).collect(), |(_, b)| b);
        let ids: Vec<i64> = newest.iter().map(|(id, _)| *id).collect();
        let rows = self.index.suite_results(suite, &ids).await.map_err(index_error)?;
        let mut tests: Vec<i64> = rows.iter().map(|r| r.test_id).collect();
        tests.sort_unstable();
        tests.dedup();
        let names: HashMap<i64, TestName> = tests.iter().copied().zip(self.names_of(&tests).await?).collect();
        let mut results: HashMap<i64, Vec<SuiteResult>> = HashMap::new();
        for row in rows {
            let test = names[&row.test_id].name.clone();
            results.entry(row.build_id).or_default().push(SuiteResult {
                test,
                cell: cell(row.status),
                message: row.message,
            });
        }
        Ok(newest
            .into_iter()
            .map(|(id, build)| SuiteBuild { build, results: results.remove(&id).unwrap_or_default() })
            .collect())
    }

    async fn grid_generation(&self, job: &str) -> Result<Option<i64>, SourceError> {
        self.index.job_generation(job).await.map_err(index_error)
    }

    async fn index_generation(&self) -> Result<i64, SourceError> {
        self.index.index_generation().await.map_err(index_error)
    }

    async fn grid(&self, job: &str, builds: usize) -> Result<Option<GridData>, SourceError> {
        let limit = i64::try_from(builds).unwrap_or(i64::MAX);
        let latest = self.index.grid_builds(job, limit).await.map_err(index_error)?;
        if latest.is_empty() && self.grid_generation(job).await?.is_none() {
            return Ok(None);
        }
        let columns: Vec<Column> = latest.iter().map(|b| column(&b.info)).collect();
        let mut rows = TestRows::new(latest.iter().flat_map(|b| b.results.iter().map(|(test, _)| *test)));
        let mut results = Vec::with_capacity(latest.iter().map(|b| b.results.len()).sum());
        for (column, build) in latest.iter().enumerate() {
            for (test, status) in &build.results {
                results.push(ResultRow { column, test: rows.row_of(*test), cell: cell(*status) });
            }
        }
        let tests = self.names_of(&rows.ids).await?;
        Ok(Some(GridData { columns, tests, results }))
    }

    async fn failures(&self, since: i64) -> Result<Vec<Failure>, SourceError> {
        // The Test step fails whenever a suite does: it would cluster every provider's failures
        // into one.
        self.index.failures_since(since, (RUNNER_SUITE, TEST_STEP)).await.map_err(index_error)
    }

    async fn trends(&self, builds: usize) -> Result<Vec<JobTrend>, SourceError> {
        let limit = i64::try_from(builds).unwrap_or(i64::MAX);
        let rows = self.index.job_trends(limit).await.map_err(index_error)?;
        let mut trends: Vec<JobTrend> = Vec::new();
        for row in rows {
            if trends.last().is_none_or(|t| t.job != row.job) {
                trends.push(JobTrend { job: row.job.clone(), points: Vec::new() });
            }
            let point = Point {
                build: row.build,
                started_at: row.started_at,
                duration_seconds: row.finished_at.map(|f| f - row.started_at),
                passed: row.passed,
                pass_rate: (row.ran_tests > 0).then(|| row.passed_tests as f64 / row.ran_tests as f64),
            };
            trends.last_mut().expect("pushed above").points.push(point);
        }
        Ok(trends)
    }

    async fn build(&self, job: &str, build: &str) -> Result<Option<BuildView>, SourceError> {
        let Some(info) = self.index.build(job, build).await.map_err(index_error)? else {
            return Ok(None);
        };
        let results = self.index.build_results(job, build).await.map_err(index_error)?;
        let (steps, tests): (Vec<_>, Vec<_>) = results.into_iter().partition(|r| r.suite == RUNNER_SUITE);
        let mut counts: Vec<(Cell, usize)> = Vec::new();
        for test in &tests {
            match counts.iter_mut().find(|(c, _)| *c == cell(test.status)) {
                Some((_, count)) => *count += 1,
                None => counts.push((cell(test.status), 1)),
            }
        }
        let (artifacts, log_tail) = self.files(&info.path).await?;
        Ok(Some(BuildView {
            job: job.to_owned(),
            column: column(&info),
            result: info.result.clone(),
            artifacts_url: info.artifacts_url.clone(),
            steps: steps.into_iter().map(|s| (s.name, cell(s.status))).collect(),
            failures: messages(&tests, TestStatus::Fail),
            known_failures: messages(&tests, TestStatus::KnownFailure),
            counts,
            artifacts: Some(artifacts),
            log_tail,
        }))
    }

    async fn artifact(&self, job: &str, build: &str, path: &str) -> Result<Option<Vec<u8>>, SourceError> {
        let Some(info) = self.index.build(job, build).await.map_err(index_error)? else {
            return Ok(None);
        };
        let bytes = self.store.get(&format!("{}/{path}", info.path)).await.map_err(unreadable)?;
        Ok(bytes.map(|b| b.to_vec()))
    }

    fn lkg(&self) -> Option<Arc<lkg::api::Snapshot>> {
        self.snapshots.borrow().clone()
    }

    fn repo(&self, provider: &str) -> Option<String> {
        self.repos.get(provider).cloned()
    }
}

/// The runner's step that fails when a suite fails (see `run::steps`).
const TEST_STEP: &str = "Test";

impl IndexSource {
    pub fn new(
        index: Index,
        store: ResultStore,
        snapshots: lkg::api::Snapshots,
        repos: BTreeMap<String, String>,
    ) -> IndexSource {
        IndexSource { index, store, snapshots, repos, test_names: Mutex::default() }
    }

    /// The names of these tests, in their order: those not read before are read now.
    async fn names_of(&self, ids: &[i64]) -> Result<Vec<TestName>, SourceError> {
        let missing: Vec<i64> = {
            let known = self.test_names.lock().unwrap_or_else(|e| e.into_inner());
            ids.iter().copied().filter(|id| !known.contains_key(id)).collect()
        };
        if !missing.is_empty() {
            let read = self.index.test_names(&missing).await.map_err(index_error)?;
            let mut known = self.test_names.lock().unwrap_or_else(|e| e.into_inner());
            for (id, suite, name) in read {
                known.insert(id, TestName { suite, name });
            }
        }
        let known = self.test_names.lock().unwrap_or_else(|e| e.into_inner());
        ids.iter()
            .map(|id| {
                let missing = || SourceError::Internal(format!("test {id} has results but no name in the index"));
                known.get(id).cloned().ok_or_else(missing)
            })
            .collect()
    }

    /// The build directory's files, and the end of its log (whole lines).
    async fn files(&self, dir: &str) -> Result<(Vec<Artifact>, Option<LogTail>), SourceError> {
        let entries = self.store.list(dir).await.map_err(unreadable)?;
        let prefix = format!("{dir}/");
        let artifacts = entries
            .into_iter()
            .filter_map(|e| Some(Artifact { path: e.path.strip_prefix(&prefix)?.to_owned(), size: e.size }))
            .collect();
        let log = format!("{dir}/{}", dashboards::web::BUILD_LOG);
        let tail = self.store.get_tail(&log, LOG_TAIL_BYTES).await.map_err(unreadable)?;
        Ok((artifacts, tail.map(|(bytes, size)| LogTail { text: whole_lines(&bytes, size > LOG_TAIL_BYTES), size })))
    }
}

/// Each test's row in a grid, by test id, in the order first seen. A job's tests are mostly ids
/// close together (added by its first builds): an array over their range finds a row without
/// hashing, which a grid does 200,000 times; ids spread wider take a map.
struct TestRows {
    /// The test of each row.
    ids: Vec<i64>,
    lookup: RowLookup,
}

enum RowLookup {
    /// Row + 1 (0: none yet) of the test `first + i`.
    Dense {
        first: i64,
        rows: Vec<u32>,
    },
    Sparse(HashMap<i64, usize>),
}

/// Dense lookups take at most this many entries (4 bytes each).
const MAX_DENSE_TESTS: i64 = 1 << 20;

impl TestRows {
    /// For these test ids (with repeats).
    fn new(ids: impl Iterator<Item = i64> + Clone) -> TestRows {
        let range = ids.clone().fold(None, |range: Option<(i64, i64)>, id| {
            Some(range.map_or((id, id), |(low, high)| (low.min(id), high.max(id))))
        });
        let lookup = match range {
            Some((low, high)) if high - low < MAX_DENSE_TESTS => {
                RowLookup::Dense { first: low, rows: vec![0; usize::try_from(high - low + 1).unwrap_or(0)] }
            }
            _ => RowLookup::Sparse(HashMap::new()),
        };
        TestRows { ids: Vec::new(), lookup }
    }

    fn row_of(&mut self, id: i64) -> usize {
        let next = self.ids.len();
        let row = match &mut self.lookup {
            RowLookup::Dense { first, rows } => {
                let slot = &mut rows[usize::try_from(id - *first).expect("within the range")];
                if *slot == 0 {
                    *slot = u32::try_from(next + 1).expect("fewer than 4 billion tests");
                }
                *slot as usize - 1
            }
            RowLookup::Sparse(rows) => *rows.entry(id).or_insert(next),
        };
        if row == next {
            self.ids.push(id);
        }
        row
    }
}

/// A store error for a page: logged whole, answered without the store's location. A store that
/// cannot be read is unavailable (an object that is not there is `None`, not an error).
fn unreadable(error: StoreError) -> SourceError {
    tracing::warn!("reading the object store for the dashboard failed: {error}");
    SourceError::Unavailable("the object store could not be read (the server's log says why)".to_owned())
}

/// An index error for a page, by what it means: the database not answering is an outage (503);
/// a row that does not read is a bug (500).
fn index_error(error: IndexError) -> SourceError {
    match error.is_unreadable_data() {
        true => SourceError::Internal(error.to_string()),
        false => SourceError::Unavailable(error.to_string()),
    }
}

/// The text of a log's tail; when it was cut, from the first whole line.
fn whole_lines(bytes: &[u8], cut: bool) -> String {
    let start = if cut { bytes.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1) } else { 0 };
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

fn column(build: &BuildInfo) -> Column {
    let state = match build.state {
        State::Running => "running",
        State::Aborted => "aborted",
        State::Finished => "finished",
    };
    Column {
        build: build.build.clone(),
        started_at: build.started_at,
        finished_at: build.finished_at,
        kubernetes_version: build.versions.kubernetes_version.clone(),
        provider_version: build.versions.provider_version.clone(),
        state: state.to_owned(),
        passed: build.passed,
    }
}

/// The tests of `status`, each with its message.
fn messages(tests: &[TestResult], status: TestStatus) -> Vec<(String, Option<String>)> {
    tests.iter().filter(|t| t.status == status).map(|t| (t.name.clone(), t.message.clone())).collect()
}

fn cell(status: TestStatus) -> Cell {
    match status {
        TestStatus::Pass => Cell::Pass,
        TestStatus::Fail => Cell::Fail,
        TestStatus::Flaky => Cell::Flaky,
        TestStatus::KnownFailure => Cell::KnownFailure,
        TestStatus::Skip => Cell::Skip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_rows_number_tests_in_the_order_first_seen_over_a_dense_range_or_a_map() {
        for ids in [vec![7, 5, 7, 6, 5, 9], vec![7, 5, 7, MAX_DENSE_TESTS * 3, 5, 9]] {
            let mut rows = TestRows::new(ids.iter().copied());
            let numbered: Vec<usize> = ids.iter().map(|id| rows.row_of(*id)).collect();
            assert_eq!(numbered, [0, 1, 0, 2, 1, 3], "{ids:?}");
            assert_eq!(rows.ids, [ids[0], ids[1], ids[3], ids[5]]);
        }
        assert!(matches!(TestRows::new([1, 2].into_iter()).lookup, RowLookup::Dense { .. }));
        assert!(matches!(TestRows::new([1, MAX_DENSE_TESTS + 1].into_iter()).lookup, RowLookup::Sparse(_)));
        assert_eq!(TestRows::new(std::iter::empty()).ids, Vec::<i64>::new());
    }

    #[test]
    fn a_cut_log_starts_at_its_first_whole_line() {
        assert_eq!(whole_lines(b"ial line\nsecond\nthird\n", true), "second\nthird\n");
        assert_eq!(whole_lines(b"first\nsecond\n", false), "first\nsecond\n");
        assert_eq!(whole_lines(b"no newline at all", true), "no newline at all");
    }
}
