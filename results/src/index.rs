//! The SQL index of published builds: one query layer over SQLite (the embedded default, a local
//! file) and PostgreSQL (`DATABASE_URL=postgres://…`), through sqlx's `Any` driver.
//!
//! Every statement is written once, with `$N` placeholders, which both drivers bind (sqlx's SQLite
//! driver reads `$N` as the N-th argument). Where the dialects differ, the schema bends rather than
//! the queries: SQLite keeps `passed` as an `INTEGER` 0/1 (the `Any` driver has no SQLite boolean),
//! and [`get_bool`] reads either. The schemas are `migrations/{sqlite,postgres}/`, embedded here and
//! applied on open.
//!
//! Indexing one build is one transaction ([`Index::index_build`]): a reader never sees a build
//! without its results, and a failure leaves nothing behind. The build's digest makes indexing it
//! again a no-op, and the `(job, path)` unique key makes concurrent indexing of the same build
//! yield one row: the first statement of the transaction is a write, so SQLite writers queue on its
//! lock (busy timeout) instead of failing, and a Postgres writer that loses the insert race sees
//! the winner's row and stops.
//!
//! A build is where it lives: its identity is its directory (`path`), so a presubmit
//! (`pr-logs/pull/<org_repo>/<pr>/<job>/<build>`) and the periodic build of the same job and id
//! (`logs/<job>/<build>`) are two builds. Where a build is named by job and id alone (the
//! dashboard's `/job/<job>/build/<build>`), that is the periodic build, else the newest presubmit
//! of that id ([`NAMED_BUILD`]). A job's provider is the first one indexed or claimed
//! ([`Index::claim_job`]); later builds never change it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failures::{Failure, NORMALISED_BY, normalise};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{Any, AnyPool, Executor, Row, Transaction};

use super::layout::Versions;
use super::record::{BuildInfo, BuildRecord, Problem, State, TestResult, TestStatus};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Rows per multi-row `INSERT` of test results (7 binds each). Measured (docs/benchmarks.md): sqlx's
/// SQLite driver slows down more than linearly with the binds of one statement (7,000 rows went in
/// at ~170k rows/s in batches of 25–50, ~21k/s in batches of 1,000), while Postgres gains from
/// fewer round trips.
const fn insert_batch(backend: Backend) -> usize {
    match backend {
        Backend::Sqlite => 40,
        Backend::Postgres => 1000,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(
        "{url:?} is not a database URL: use sqlite://path/to/index.sqlite (created if missing) or postgres://user@host/db"
    )]
    BadUrl { url: String },
    #[error(
        "no index at {path}: nothing was published there yet. Publish first (`harness run`, `harness publish` or `harness index`), or create an empty index for a new central service (`harness migrate`, or `harness serve --migrate`); else --database / DATABASE_URL names the wrong file"
    )]
    Missing { path: std::path::PathBuf },
    #[error("cannot create {dir} for the SQLite index: {source}")]
    CreateDir { dir: std::path::PathBuf, source: std::io::Error },
    #[error("cannot lock {path} to migrate the SQLite index: {source}")]
    Lock { path: std::path::PathBuf, source: std::io::Error },
    #[error("cannot connect to {url}: {source} (is the database up, and the URL right?)")]
    Connect { url: String, source: sqlx::Error },
    #[error("cannot migrate {url} to the harness schema: {source}")]
    Migrate { url: String, source: sqlx::migrate::MigrateError },
    #[error("{database}: {action}: {source}")]
    Query { database: String, action: &'static str, source: sqlx::Error },
    #[error("{database}: column {column} holds {value:?}, which the harness never writes")]
    BadValue { database: String, column: &'static str, value: String },
}

impl IndexError {
    /// The database answered, but with what the harness cannot read (a row that does not decode,
    /// a value it never writes, a schema it does not know): a bug, where every other error is the
    /// database not being there.
    pub fn is_unreadable_data(&self) -> bool {
        match self {
            IndexError::Query { source, .. } => matches!(
                source,
                sqlx::Error::ColumnDecode { .. }
                    | sqlx::Error::Decode(_)
                    | sqlx::Error::ColumnNotFound(_)
                    | sqlx::Error::ColumnIndexOutOfBounds { .. }
                    | sqlx::Error::TypeNotFound { .. }
                    | sqlx::Error::RowNotFound
            ),
            IndexError::BadValue { .. } | IndexError::Migrate { .. } => true,
            IndexError::BadUrl { .. }
            | IndexError::Missing { .. }
            | IndexError::CreateDir { .. }
            | IndexError::Lock { .. }
            | IndexError::Connect { .. } => false,
        }
    }
}

impl IndexError {
    /// Whether asking again later may succeed: the database could not be reached (a connection
    /// refused or cut, a timeout, no connection free before the pool's deadline), is shutting down
    /// or starting up, or the transaction lost a conflict or a lock (Postgres' classes 08, 40001,
    /// 40P01, 53300, 57P01-03; SQLite's busy and locked). A bad URL, a refused password, a missing
    /// database or data the harness cannot read stays as it is.
    pub fn is_transient(&self) -> bool {
        match self {
            IndexError::Connect { source, .. } | IndexError::Query { source, .. } => transient_sqlx(source),
            IndexError::BadUrl { .. }
            | IndexError::Missing { .. }
            | IndexError::CreateDir { .. }
            | IndexError::Lock { .. }
            | IndexError::Migrate { .. }
            | IndexError::BadValue { .. } => false,
        }
    }
}

fn transient_sqlx(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(e) => crate::transient_io(e.kind()),
        sqlx::Error::Tls(e) => crate::network_failure(e.as_ref()),
        sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(e) => {
            if let Some(postgres) = e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                let code = postgres.code();
                code.starts_with("08") || ["40001", "40P01", "53300", "57P01", "57P02", "57P03"].contains(&code)
            } else if e.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                // The extended result code; its low byte is the primary: SQLITE_BUSY, SQLITE_LOCKED.
                let primary = e.code().and_then(|code| code.parse::<i32>().ok()).map(|code| code & 0xff);
                matches!(primary, Some(5 | 6))
            } else {
                false
            }
        }
        _ => false,
    }
}

/// A dashboard answers 500 for data it cannot read and 503 for a database that is not there: the
/// index says which an error is.
#[cfg(test)]
#[test]
fn an_error_says_whether_the_database_answered_with_what_cannot_be_read() {
    let query = |source| IndexError::Query { database: "sqlite:x".into(), action: "reading builds", source };
    let decode = sqlx::Error::ColumnDecode { index: "started_at".into(), source: "not an integer".into() };
    assert!(query(decode).is_unreadable_data());
    assert!(IndexError::BadValue { database: "x".into(), column: "state", value: "??".into() }.is_unreadable_data());
    assert!(!query(sqlx::Error::PoolTimedOut).is_unreadable_data());
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert!(!query(sqlx::Error::Io(refused)).is_unreadable_data());
}

/// Publishing retries what waiting can heal (a database down, busy or restarting), and only that.
#[cfg(test)]
#[tokio::test]
async fn an_error_says_whether_the_database_may_answer_later() {
    use sqlx::Connection;
    let query = |source| IndexError::Query { database: "sqlite:x".into(), action: "indexing a build", source };
    // A Postgres port where nothing listens: refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let refused = Index::open(&format!("postgres://harness@{closed}/postgres")).await.unwrap_err();
    assert!(matches!(refused, IndexError::Connect { .. }) && refused.is_transient(), "{refused}");
    assert!(query(sqlx::Error::PoolTimedOut).is_transient());
    let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    assert!(query(sqlx::Error::Io(reset)).is_transient());

    // SQLite busy: another connection holds the write lock, and this one does not wait for it.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("busy.sqlite").display());
    sqlx::any::install_default_drivers();
    let mut holder = sqlx::AnyConnection::connect(&url).await.unwrap();
    holder.execute("CREATE TABLE t (x INTEGER)").await.unwrap();
    holder.execute("BEGIN IMMEDIATE").await.unwrap();
    let mut writer = sqlx::AnyConnection::connect(&url).await.unwrap();
    writer.execute("PRAGMA busy_timeout = 0").await.unwrap();
    let busy = query(writer.execute("INSERT INTO t VALUES (1)").await.unwrap_err());
    assert!(busy.is_transient(), "{busy}");
    let syntax = query(writer.execute("INSERT INTO nowhere VALUES (1)").await.unwrap_err());
    assert!(!syntax.is_transient(), "{syntax}");

    // What waiting does not heal.
    let index = Index::open(&format!("sqlite://{}", dir.path().join("index.sqlite").display())).await.unwrap();
    index.close().await;
    let closed_pool = index.counts().await.unwrap_err();
    assert!(!closed_pool.is_transient(), "{closed_pool}");
    assert!(!Index::open("mysql://x").await.unwrap_err().is_transient());
    let decode = sqlx::Error::ColumnDecode { index: "started_at".into(), source: "not an integer".into() };
    assert!(!query(decode).is_transient());
    assert!(!IndexError::BadValue { database: "x".into(), column: "state", value: "??".into() }.is_transient());
}

pub type Result<T> = std::result::Result<T, IndexError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// What [`Index::index_build`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexed {
    Inserted,
    /// The build was indexed before from other content (it finished since, say): replaced.
    Replaced,
    Unchanged,
}

/// One result of a test in a build (for "all results of one test across builds").
#[derive(Debug, Clone, PartialEq)]
pub struct TestRun {
    pub job: String,
    pub build: String,
    pub started_at: i64,
    pub result: TestResult,
}

/// Everything in the index, by natural keys and in a fixed order: two indexes built from the same
/// store compare equal whatever their row ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub builds: Vec<BuildInfo>,
    /// `(job, build, result)` in insertion order within each build.
    pub results: Vec<(String, String, TestResult)>,
    pub problems: Vec<(String, String, Problem)>,
}

/// What the LKG computation reads from the index (see [`Index::lkg_rows`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LkgRows {
    pub builds: Vec<LkgBuild>,
    /// `(test row id, test name)`.
    pub tests: Vec<(i64, String)>,
    /// `(build row id, test row id, status)`, in insertion order within each build.
    pub results: Vec<(i64, i64, TestStatus)>,
}

/// A finished build as the LKG computation takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct LkgBuild {
    pub row: i64,
    pub job: String,
    pub build: String,
    /// As its metadata named it; `None` for builds of existing Prow jobs, which providers.yaml maps.
    pub provider: Option<String>,
    pub kubernetes_version: Option<String>,
    pub provider_version: Option<String>,
    pub artifacts_url: String,
    pub started_at: i64,
    /// `finished.json` `passed`: a build that failed is never good evidence.
    pub passed: Option<bool>,
    /// What Prow's own fields say it tested, for builds without the harness's metadata.
    pub job_version: Option<String>,
    pub repo_commit: Option<String>,
    pub repos: BTreeMap<String, String>,
    /// SHA-256 of what the row was read from: a build whose digest changed was replaced.
    pub digest: String,
}

/// Builds whose results one statement of [`Index::for_each_lkg_result`] reads.
const RESULT_BUILDS_PER_QUERY: usize = 500;

/// The index: a pool on one database.
#[derive(Debug, Clone)]
pub struct Index {
    pool: AnyPool,
    backend: Backend,
    /// Test ids known to be committed (suite → name → id). Tests are never deleted, and thousands
    /// recur in every build, so most builds need no lookup at all.
    known_tests: Arc<Mutex<TestIds>>,
    /// The URL without a password, for messages.
    name: String,
}

const BUILD_COLUMNS: &str = "j.name AS job, b.build, b.path, b.pull, p.name AS provider, b.state, b.started_at, \
     b.finished_at, b.passed, b.result, b.kubernetes_version, b.provider_version, b.ccm_version, b.job_version, \
     b.repo_commit, b.artifacts_url, b.digest";
const BUILD_FROM: &str = "builds b JOIN jobs j ON j.id = b.job_id LEFT JOIN providers p ON p.id = j.provider_id";
/// The build a job name (`$1`) and build id (`$2`) name: the periodic one (`logs/…`) if there is
/// one, else the newest presubmit of that id.
const NAMED_BUILD: &str = "(SELECT nb.id FROM builds nb JOIN jobs nj ON nj.id = nb.job_id \
     WHERE nj.name = $1 AND nb.build = $2 \
     ORDER BY CASE WHEN nb.path LIKE 'logs/%' THEN 0 ELSE 1 END, nb.started_at DESC, nb.id DESC LIMIT 1)";

impl Index {
    /// Connects (creating a SQLite file and its directory if needed) and applies the migrations.
    /// A query waits up to a minute for a connection: batch jobs ride out a database restart.
    pub async fn open(url: &str) -> Result<Index> {
        Self::open_waiting(url, Duration::from_secs(60)).await
    }

    /// As [`Index::open`] for commands that only read (`harness lkg`, `harness serve` without
    /// `--migrate`): a SQLite file that does not exist is an error naming it, never created
    /// empty (a typo in `--database` would otherwise answer "no LKG" with exit 0).
    pub async fn open_existing(url: &str) -> Result<Index> {
        Self::open_existing_waiting(url, Duration::from_secs(60)).await
    }

    /// [`Index::open_existing`] with [`Index::open_waiting`]'s acquire timeout.
    pub async fn open_existing_waiting(url: &str, acquire_timeout: Duration) -> Result<Index> {
        if let Some(file) = sqlite_file(url).filter(|file| file != ":memory:")
            && !Path::new(&file).is_file()
        {
            return Err(IndexError::Missing { path: file.into() });
        }
        Self::open_waiting(url, acquire_timeout).await
    }

    /// As [`Index::open`], a query failing after `acquire_timeout` without a connection: a server
    /// answers "unavailable" quickly rather than hang while the database is down.
    pub async fn open_waiting(url: &str, acquire_timeout: Duration) -> Result<Index> {
        sqlx::any::install_default_drivers();
        let (backend, url) = normalise_url(url)?;
        let name = redact(&url);
        // One plain connection first: a dead server fails at once, not after the pool's retries.
        let probe = tokio::time::timeout(CONNECT_TIMEOUT, <sqlx::AnyConnection as sqlx::Connection>::connect(&url));
        match probe.await {
            Ok(Ok(conn)) => drop(conn),
            Ok(Err(source)) => return Err(IndexError::Connect { url: name, source }),
            Err(_) => return Err(IndexError::Connect { url: name, source: sqlx::Error::PoolTimedOut }),
        }
        let options = AnyPoolOptions::new().acquire_timeout(acquire_timeout);
        let pool = match backend {
            Backend::Sqlite => {
                options
                    .max_connections(4)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // Writers wait for each other rather than fail; WAL lets readers go on.
                            conn.execute("PRAGMA busy_timeout = 60000").await?;
                            conn.execute("PRAGMA foreign_keys = ON").await?;
                            conn.execute("PRAGMA journal_mode = WAL").await?;
                            conn.execute("PRAGMA synchronous = NORMAL").await?;
                            // 32 MiB of page cache (the default is 2 MiB): the per-test index is
                            // touched all over by every build.
                            conn.execute("PRAGMA cache_size = -32768").await?;
                            // Checkpoint every 64 MiB of WAL, not 4 MiB: each build rewrites a leaf
                            // page of the per-test index per test, and a page rewritten by several
                            // builds is then copied back once (measured: +24% at 640k results).
                            conn.execute("PRAGMA wal_autocheckpoint = 16384").await?;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await
            }
            Backend::Postgres => {
                options
                    .max_connections(8)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // No JIT: the index's queries are short, and a plan whose estimate
                            // passes jit_above_cost (a correlated count that never runs is enough)
                            // spent ~0.5 s compiling before answering the home page in 6 ms.
                            // (A server older than 11 has no such setting: nothing to turn off.)
                            let _ = conn.execute("SET jit = off").await;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await
            }
        }
        .map_err(|source| IndexError::Connect { url: name.clone(), source })?;
        let migrator =
            migrations::migrator(backend).await.map_err(|source| IndexError::Migrate { url: name.clone(), source })?;
        // sqlx locks Postgres migrations (an advisory lock) but not SQLite's: two processes
        // opening a new file at once (a parallel matrix) would both create the tables.
        let _migrating = match backend {
            Backend::Sqlite => Some(lock_beside(&url).await?),
            Backend::Postgres => None,
        };
        migrator.run(&pool).await.map_err(|source| IndexError::Migrate { url: name.clone(), source })?;
        Ok(Index { pool, backend, name, known_tests: Arc::default() })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The database URL, password removed.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    fn err(&self, action: &'static str) -> impl FnOnce(sqlx::Error) -> IndexError + '_ {
        move |source| IndexError::Query { database: self.name.clone(), action, source }
    }

    /// Indexes one build in one transaction; a build with the same digest is left alone.
    pub async fn index_build(&self, record: &BuildRecord) -> Result<Indexed> {
        let mut tx = self.pool.begin().await.map_err(self.err("begin a transaction"))?;
        let info = &record.info;
        let mut learned = TestIds::default();
        let job_id = self.upsert_job(&mut tx, &info.job, info.provider.as_deref()).await?;
        let existing = self.find_build(&mut tx, job_id, &info.path).await?;
        let outcome = match existing {
            Some((_, digest)) if digest == info.digest => Indexed::Unchanged,
            Some((build_id, _)) => {
                self.replace_build(&mut tx, build_id, job_id, record, &mut learned).await?;
                Indexed::Replaced
            }
            None => match self.insert_build(&mut tx, job_id, record, &mut learned).await? {
                Some(_) => Indexed::Inserted,
                // A concurrent transaction inserted it first (Postgres waits for it, then skips).
                None => match self.find_build(&mut tx, job_id, &info.path).await? {
                    Some((build_id, digest)) if digest != info.digest => {
                        self.replace_build(&mut tx, build_id, job_id, record, &mut learned).await?;
                        Indexed::Replaced
                    }
                    _ => Indexed::Unchanged,
                },
            },
        };
        if outcome != Indexed::Unchanged {
            sqlx::query("UPDATE jobs SET generation = generation + 1 WHERE id = $1")
                .bind(job_id)
                .execute(&mut *tx)
                .await
                .map_err(self.err("count the job's change"))?;
        }
        tx.commit().await.map_err(self.err("commit the build"))?;
        // Only now are the tests this transaction added sure to exist.
        let mut known = self.known_tests.lock().unwrap_or_else(|e| e.into_inner());
        if known.values().map(HashMap::len).sum::<usize>() > MAX_KNOWN_TESTS {
            known.clear();
        }
        for (suite, names) in learned {
            known.entry(suite).or_default().extend(names);
        }
        Ok(outcome)
    }

    /// The job's id; creates the job (and its provider) if new. Always a write, and the first
    /// statement of the transaction (see the module doc). A job keeps the provider it was first
    /// given.
    async fn upsert_job(&self, tx: &mut Transaction<'_, Any>, job: &str, provider: Option<&str>) -> Result<i64> {
        let provider_id = match provider {
            None => None,
            Some(name) => {
                sqlx::query("INSERT INTO providers (name) VALUES ($1) ON CONFLICT (name) DO NOTHING")
                    .bind(name)
                    .execute(&mut **tx)
                    .await
                    .map_err(self.err("add the provider"))?;
                let row = sqlx::query("SELECT id FROM providers WHERE name = $1")
                    .bind(name)
                    .fetch_one(&mut **tx)
                    .await
                    .map_err(self.err("find the provider"))?;
                Some(row.try_get::<i64, _>(0).map_err(self.err("read the provider id"))?)
            }
        };
        let row = sqlx::query(
            "INSERT INTO jobs (name, provider_id) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET provider_id = COALESCE(jobs.provider_id, excluded.provider_id) \
             RETURNING id",
        )
        .bind(job)
        .bind(provider_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(self.err("add the job"))?;
        row.try_get::<i64, _>(0).map_err(self.err("read the job id"))
    }

    /// The build at `path`: its row id and digest.
    async fn find_build(
        &self,
        tx: &mut Transaction<'_, Any>,
        job_id: i64,
        path: &str,
    ) -> Result<Option<(i64, String)>> {
        let row = sqlx::query("SELECT id, digest FROM builds WHERE job_id = $1 AND path = $2")
            .bind(job_id)
            .bind(path)
            .fetch_optional(&mut **tx)
            .await
            .map_err(self.err("find the build"))?;
        row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose().map_err(self.err("read the build"))
    }

    /// Inserts the build row and its children; `None` when the row already existed.
    async fn insert_build(
        &self,
        tx: &mut Transaction<'_, Any>,
        job_id: i64,
        r: &BuildRecord,
        learned: &mut TestIds,
    ) -> Result<Option<i64>> {
        let sql = "INSERT INTO builds (job_id, build, path, pull, state, started_at, finished_at, passed, result, \
             kubernetes_version, provider_version, ccm_version, job_version, repo_commit, artifacts_url, digest, repos) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
             ON CONFLICT (job_id, path) DO NOTHING RETURNING id";
        let row = bind_build(sqlx::query(sql), job_id, &r.info)
            .fetch_optional(&mut **tx)
            .await
            .map_err(self.err("add the build"))?;
        let Some(row) = row else { return Ok(None) };
        let build_id: i64 = row.try_get(0).map_err(self.err("read the build id"))?;
        self.insert_children(tx, build_id, r, learned).await?;
        Ok(Some(build_id))
    }

    async fn replace_build(
        &self,
        tx: &mut Transaction<'_, Any>,
        build_id: i64,
        job_id: i64,
        r: &BuildRecord,
        learned: &mut TestIds,
    ) -> Result<()> {
        for table in [
            "DELETE FROM test_results WHERE build_id = $1",
            "DELETE FROM build_problems WHERE build_id = $1",
            "DELETE FROM build_suites WHERE build_id = $1",
        ] {
            sqlx::query(table).bind(build_id).execute(&mut **tx).await.map_err(self.err("clear the build's rows"))?;
        }
        let sql = "UPDATE builds SET job_id = $1, build = $2, path = $3, pull = $4, state = $5, started_at = $6, \
             finished_at = $7, passed = $8, result = $9, kubernetes_version = $10, provider_version = $11, \
             ccm_version = $12, job_version = $13, repo_commit = $14, artifacts_url = $15, digest = $16, repos = $17, \
             results_expired_at = NULL WHERE id = $18";
        bind_build(sqlx::query(sql), job_id, &r.info)
            .bind(build_id)
            .execute(&mut **tx)
            .await
            .map_err(self.err("update the build"))?;
        self.insert_children(tx, build_id, r, learned).await
    }

    /// Test results in multi-row batches, then problems.
    async fn insert_children(
        &self,
        tx: &mut Transaction<'_, Any>,
        build_id: i64,
        r: &BuildRecord,
        learned: &mut TestIds,
    ) -> Result<()> {
        let ids = self.test_ids(tx, &r.results, learned).await?;
        for (batch, ids) in r.results.chunks(insert_batch(self.backend)).zip(ids.chunks(insert_batch(self.backend))) {
            let sql = format!(
                "INSERT INTO test_results (build_id, test_id, status, duration_seconds, failure_message, \
                 failure_key, failure_key_version) VALUES {}",
                placeholders(batch.len(), 7)
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (t, id) in batch.iter().zip(ids) {
                // What the failure clusters group a failure by, worked out once, here.
                let key = (t.status == TestStatus::Fail).then_some(t.message.as_deref()).flatten().map(normalise);
                let version = key.is_some().then_some(NORMALISED_BY);
                query = query
                    .bind(build_id)
                    .bind(*id)
                    .bind(t.status.as_str())
                    .bind(t.duration_seconds)
                    .bind(&t.message)
                    .bind(key)
                    .bind(version);
            }
            query.execute(&mut **tx).await.map_err(self.err("add test results"))?;
        }
        let packed = packed_cells::pack(ids.iter().copied().zip(r.results.iter().map(|t| t.status)));
        self.write_cells(tx, build_id, &r.info.digest, packed).await?;
        let suites: BTreeSet<&str> = r.results.iter().map(|t| t.suite.as_str()).collect();
        for suite in suites {
            sqlx::query("INSERT INTO build_suites (suite, build_id) VALUES ($1, $2)")
                .bind(suite)
                .bind(build_id)
                .execute(&mut **tx)
                .await
                .map_err(self.err("add a suite of the build"))?;
        }
        for p in &r.problems {
            sqlx::query("INSERT INTO build_problems (build_id, file, message) VALUES ($1, $2, $3)")
                .bind(build_id)
                .bind(&p.file)
                .bind(&p.message)
                .execute(&mut **tx)
                .await
                .map_err(self.err("add a problem"))?;
        }
        Ok(())
    }

    /// The test id of each result, in order. Tests not yet known are looked up and, if new, added
    /// (`learned` gets them; they join [`Index::known_tests`] once the transaction commits).
    /// Insert first, ignoring the existing ones, then read the ids: a test a concurrent
    /// transaction adds is then waited for (Postgres) or already there (SQLite's single writer).
    async fn test_ids<'r>(
        &self,
        tx: &mut Transaction<'_, Any>,
        results: &'r [TestResult],
        learned: &mut TestIds,
    ) -> Result<Vec<i64>> {
        let mut missing: Vec<(&'r str, &'r str)> = {
            let known = self.known_tests.lock().unwrap_or_else(|e| e.into_inner());
            let unknown = |t: &&TestResult| lookup(&known, &t.suite, &t.name).is_none();
            results.iter().filter(unknown).map(|t| (t.name.as_str(), t.suite.as_str())).collect()
        };
        missing.sort_unstable();
        missing.dedup();
        // Two binds a row: SQLite takes more rows per statement here than for results.
        let rows_per_statement = 2 * insert_batch(self.backend);
        for batch in missing.chunks(rows_per_statement) {
            let bind_all = |sql: String, batch: &[(&'r str, &'r str)]| {
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
                for (name, suite) in batch {
                    query = query.bind(*name).bind(*suite);
                }
                query
            };
            // New tests come back from the insert; the ones that were there need a lookup.
            let values = placeholders(batch.len(), 2);
            let insert = format!(
                "INSERT INTO tests (name, suite) VALUES {values} ON CONFLICT (name, suite) DO NOTHING \
                 RETURNING id, name, suite"
            );
            let added = bind_all(insert, batch).fetch_all(&mut **tx).await.map_err(self.err("add tests"))?;
            self.learn(&added, learned)?;
            let existing: Vec<(&str, &str)> =
                batch.iter().filter(|(name, suite)| lookup(learned, suite, name).is_none()).copied().collect();
            if !existing.is_empty() {
                let values = placeholders(existing.len(), 2);
                let select = format!("SELECT id, name, suite FROM tests WHERE (name, suite) IN (VALUES {values})");
                let found = bind_all(select, &existing).fetch_all(&mut **tx).await.map_err(self.err("find tests"))?;
                self.learn(&found, learned)?;
            }
        }
        let known = self.known_tests.lock().unwrap_or_else(|e| e.into_inner());
        Ok(results
            .iter()
            .map(|t| {
                lookup(learned, &t.suite, &t.name)
                    .or_else(|| lookup(&known, &t.suite, &t.name))
                    .expect("every result's test was looked up or added")
            })
            .collect())
    }

    /// Adds `(id, name, suite)` rows to `learned`.
    fn learn(&self, rows: &[AnyRow], learned: &mut TestIds) -> Result<()> {
        for row in rows {
            let (id, name, suite): (i64, String, String) =
                self.decode(|| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))?;
            learned.entry(suite).or_default().insert(name, id);
        }
        Ok(())
    }

    /// The newest `limit` builds of a job, newest first.
    pub async fn latest_builds(&self, job: &str, limit: i64) -> Result<Vec<BuildInfo>> {
        let sql = format!(
            "SELECT {BUILD_COLUMNS} FROM {BUILD_FROM} WHERE j.name = $1 ORDER BY b.started_at DESC, b.build DESC LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
            .map_err(self.err("list builds"))?;
        rows.iter().map(|r| self.build_row(r)).collect()
    }

    /// The suite and name of each of these tests: `(id, suite, name)`.
    pub async fn test_names(&self, ids: &[i64]) -> Result<Vec<(i64, String, String)>> {
        let mut names = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(1000) {
            let list = row_list(chunk);
            let sql = format!("SELECT id, suite, name FROM tests WHERE id IN ({list})");
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_all(&self.pool)
                .await
                .map_err(self.err("read test names"))?;
            for r in &rows {
                names.push(self.decode(|| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))?);
            }
        }
        Ok(names)
    }

    /// Every failed result of the builds started at or after `since` (epoch seconds), with its
    /// build's versions, its message and the message normalised when it was indexed (by this
    /// version of the normaliser), but those of the test `except` (suite, name); the partial index
    /// `test_results_failed` finds them.
    pub async fn failures_since(&self, since: i64, except: (&str, &str)) -> Result<Vec<Failure>> {
        // A row per build, its failures as one JSON array of [test, message, normalised message]:
        // thousands of rows cost the SQLite driver a thread switch each.
        let failed = match self.backend {
            Backend::Sqlite => {
                "json_group_array(json_array(te.name, t.failure_message, \
                 CASE WHEN t.failure_key_version = $4 THEN t.failure_key END))"
            }
            Backend::Postgres => {
                "json_agg(json_build_array(te.name, t.failure_message, \
                 CASE WHEN t.failure_key_version = $4 THEN t.failure_key END))::text"
            }
        };
        let sql = format!(
            "SELECT p.name, j.name, b.build, b.started_at, b.kubernetes_version, b.provider_version, \
             (SELECT {failed} FROM test_results t JOIN tests te ON te.id = t.test_id \
             WHERE t.build_id = b.id AND t.status = 'fail' AND NOT (te.suite = $2 AND te.name = $3)) \
             FROM builds b JOIN jobs j ON j.id = b.job_id LEFT JOIN providers p ON p.id = j.provider_id \
             WHERE b.started_at >= $1"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(since)
            .bind(except.0)
            .bind(except.1)
            .bind(NORMALISED_BY)
            .fetch_all(&self.pool)
            .await
            .map_err(self.err("list recent failures"))?;
        let mut failures = Vec::new();
        for r in &rows {
            let failed: Option<String> = self.decode(|| r.try_get(6))?;
            let failed: Vec<(String, Option<String>, Option<String>)> = match failed {
                Some(json) => {
                    serde_json::from_str(&json).map_err(|_| self.bad_value("failed results as JSON", json))?
                }
                None => Vec::new(),
            };
            for (test, message, normalised) in failed {
                failures.push(self.decode(|| {
                    Ok(Failure {
                        provider: r.try_get(0)?,
                        job: r.try_get(1)?,
                        build: r.try_get(2)?,
                        started_at: r.try_get(3)?,
                        kubernetes_version: r.try_get(4)?,
                        provider_version: r.try_get(5)?,
                        test,
                        message,
                        normalised,
                    })
                })?);
            }
        }
        Ok(failures)
    }

    /// Each job's latest `limit` finished builds, oldest first per job: `(job, build, started,
    /// finished, passed, tests passed or flaky, tests that ran)`, counted when the builds were
    /// indexed (`build_cells`), or now for a build without its packed row.
    pub async fn job_trends(&self, limit: i64) -> Result<Vec<TrendRow>> {
        let rows = sqlx::query(
            "SELECT r.job, r.build, r.started_at, r.finished_at, r.passed, \
             CASE WHEN c.digest = r.digest THEN c.passed_tests ELSE (SELECT COUNT(*) FROM test_results t \
             WHERE t.build_id = r.id AND t.status IN ('pass', 'flaky')) END, \
             CASE WHEN c.digest = r.digest THEN c.ran_tests ELSE (SELECT COUNT(*) FROM test_results t \
             WHERE t.build_id = r.id AND t.status IN ('pass', 'flaky', 'fail', 'known-failure')) END \
             FROM (SELECT b.id, b.digest, j.name AS job, b.build, b.started_at, b.finished_at, b.passed, \
             ROW_NUMBER() OVER (PARTITION BY b.job_id ORDER BY b.started_at DESC, b.build DESC) AS n \
             FROM builds b JOIN jobs j ON j.id = b.job_id WHERE b.state = 'finished') r \
             LEFT JOIN build_cells c ON c.build_id = r.id \
             WHERE r.n <= $1 ORDER BY r.job, r.started_at, r.build",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(self.err("list the jobs' latest builds"))?;
        rows.iter()
            .map(|r| {
                self.decode(|| {
                    Ok(TrendRow {
                        job: r.try_get(0)?,
                        build: r.try_get(1)?,
                        started_at: r.try_get(2)?,
                        finished_at: r.try_get(3)?,
                        passed: get_bool(r, "passed")?,
                        passed_tests: r.try_get(5)?,
                        ran_tests: r.try_get(6)?,
                    })
                })
            })
            .collect()
    }

    /// Every job with its provider, by name.
    pub async fn jobs(&self) -> Result<Vec<(String, Option<String>)>> {
        self.fetch_rows(
            "SELECT j.name, p.name FROM jobs j LEFT JOIN providers p ON p.id = j.provider_id ORDER BY j.name",
            "list jobs",
            |r| Ok((r.try_get(0)?, r.try_get(1)?)),
        )
        .await
    }

    /// Every finished build that names its provider and Kubernetes version, for the dashboard's
    /// matrix.
    pub async fn matrix_builds(&self) -> Result<Vec<VersionedBuild>> {
        self.fetch_rows(
            "SELECT p.name AS provider, j.name AS job, b.build, b.kubernetes_version, b.provider_version, \
             b.started_at, b.passed FROM builds b JOIN jobs j ON j.id = b.job_id JOIN providers p ON p.id = j.provider_id \
             WHERE b.state = 'finished' AND b.kubernetes_version IS NOT NULL",
            "list finished builds for the matrix",
            versioned_build,
        )
        .await
    }

    /// Every finished build with results of `suite` that names its provider and Kubernetes
    /// version, with its row id for [`Index::suite_results`]: the columns of the dashboard's
    /// per-test table. A build whose passes and skips have expired (`--keep-results`) is left
    /// out: it would show its failures alone.
    pub async fn suite_builds(&self, suite: &str) -> Result<Vec<(i64, VersionedBuild)>> {
        let rows = sqlx::query(
            "SELECT b.id, p.name AS provider, j.name AS job, b.build, b.kubernetes_version, b.provider_version, \
             b.started_at, b.passed FROM builds b JOIN jobs j ON j.id = b.job_id JOIN providers p ON p.id = j.provider_id \
             JOIN build_suites s ON s.build_id = b.id AND s.suite = $1 \
             WHERE b.state = 'finished' AND b.kubernetes_version IS NOT NULL AND b.results_expired_at IS NULL",
        )
        .bind(suite)
        .fetch_all(&self.pool)
        .await
        .map_err(self.err("list the builds of a suite"))?;
        rows.iter().map(|r| self.decode(|| Ok((r.try_get(0)?, versioned_build(r)?)))).collect()
    }

    /// The results of `suite` in these builds (row ids from [`Index::suite_builds`]). Tests by id
    /// ([`Index::test_names`]). Read from each build's packed results (one row a build, where a
    /// conformance build has thousands of results) and the results that say something (a
    /// failure's message, a skip's reason); a build without packed results of its content from
    /// its results.
    pub async fn suite_results(&self, suite: &str, builds: &[i64]) -> Result<Vec<SuiteResultRow>> {
        let tests = sqlx::query("SELECT id FROM tests WHERE suite = $1")
            .bind(suite)
            .fetch_all(&self.pool)
            .await
            .map_err(self.err("list a suite's tests"))?;
        let in_suite: HashSet<i64> = tests.iter().map(|r| self.decode(|| r.try_get(0))).collect::<Result<_>>()?;
        let mut messages: HashMap<(i64, i64), String> = HashMap::new();
        let mut results = Vec::new();
        let mut packed = HashSet::new();
        for chunk in builds.chunks(PACKED_SUITE_BUILDS) {
            let list = row_list(chunk);
            let sql = format!(
                "SELECT t.build_id, t.test_id, t.failure_message FROM test_results t \
                 WHERE t.build_id IN ({list}) AND t.failure_message IS NOT NULL"
            );
            for r in sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_all(&self.pool)
                .await
                .map_err(self.err("read a suite's messages"))?
            {
                let (build, test, message) = self.decode(|| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))?;
                messages.insert((build, test), message);
            }
            let sql = format!(
                "SELECT c.build_id, c.cells FROM build_cells c JOIN builds b ON b.id = c.build_id AND b.digest = c.digest \
                 WHERE c.build_id IN ({list})"
            );
            for r in sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_all(&self.pool)
                .await
                .map_err(self.err("read packed results"))?
            {
                let (build_id, cells): (i64, &str) = self.decode(|| Ok((r.try_get(0)?, r.try_get(1)?)))?;
                let Some(cells) = packed_cells::unpack(cells) else { continue };
                packed.insert(build_id);
                for (test_id, status) in cells.into_iter().filter(|(test, _)| in_suite.contains(test)) {
                    let message = messages.remove(&(build_id, test_id));
                    results.push(SuiteResultRow { build_id, test_id, status, message });
                }
            }
        }
        let unpacked: Vec<i64> = builds.iter().copied().filter(|b| !packed.contains(b)).collect();
        for chunk in unpacked.chunks(1000) {
            let sql = format!(
                "SELECT t.build_id, t.test_id, t.status, t.failure_message FROM test_results t \
                 WHERE t.build_id IN ({}) AND t.test_id IN (SELECT id FROM tests WHERE suite = $1) ORDER BY t.id",
                row_list(chunk)
            );
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(suite)
                .fetch_all(&self.pool)
                .await
                .map_err(self.err("list a suite's results"))?;
            for r in &rows {
                let status: String = self.decode(|| r.try_get(2))?;
                let status = TestStatus::parse(&status).ok_or_else(|| self.bad_value("test_results.status", status))?;
                let (build_id, test_id, message) = self.decode(|| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(3)?)))?;
                results.push(SuiteResultRow { build_id, test_id, status, message });
            }
        }
        Ok(results)
    }

    /// Every suite a build has results of, by name.
    pub async fn suites(&self) -> Result<Vec<String>> {
        self.fetch_rows("SELECT DISTINCT suite FROM build_suites ORDER BY suite", "list the suites", |r| r.try_get(0))
            .await
    }

    /// A number that changes whenever a build of the job is inserted or replaced; `None` for an
    /// unknown job.
    pub async fn job_generation(&self, job: &str) -> Result<Option<i64>> {
        let row = sqlx::query("SELECT generation FROM jobs WHERE name = $1")
            .bind(job)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("read the job's generation"))?;
        row.map(|r| self.decode(|| r.try_get(0))).transpose()
    }

    /// One build, by job and build id: the periodic one, else the newest presubmit of that id
    /// (see the module doc).
    pub async fn build(&self, job: &str, build: &str) -> Result<Option<BuildInfo>> {
        let sql = format!("SELECT {BUILD_COLUMNS} FROM {BUILD_FROM} WHERE b.id = {NAMED_BUILD}");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job)
            .bind(build)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("find a build"))?;
        row.map(|r| self.build_row(&r)).transpose()
    }

    /// The build whose directory is `path` (`logs/<job>/<build>` or `pr-logs/pull/…`).
    pub async fn build_at(&self, path: &str) -> Result<Option<BuildInfo>> {
        let sql = format!("SELECT {BUILD_COLUMNS} FROM {BUILD_FROM} WHERE b.path = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(path)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("find a build"))?;
        row.map(|r| self.build_row(&r)).transpose()
    }

    /// Every result of one test across builds (of any job), newest build first.
    pub async fn test_history(&self, test: &str, limit: i64) -> Result<Vec<TestRun>> {
        let rows = sqlx::query(
            "SELECT j.name, b.build, b.started_at, te.suite, te.name, t.status, t.duration_seconds, t.failure_message \
             FROM tests te JOIN test_results t ON t.test_id = te.id JOIN builds b ON b.id = t.build_id \
             JOIN jobs j ON j.id = b.job_id WHERE te.name = $1 ORDER BY b.started_at DESC, b.build DESC, t.id LIMIT $2",
        )
        .bind(test)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(self.err("list a test's results"))?;
        rows.iter()
            .map(|r| {
                let (job, build, started_at) = self.decode(|| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))?;
                Ok(TestRun { job, build, started_at, result: self.test_result(r, 3)? })
            })
            .collect()
    }

    /// The results of one build (as [`Index::build`] names it), in the order they were read.
    pub async fn build_results(&self, job: &str, build: &str) -> Result<Vec<TestResult>> {
        let Some((row, expired)) = self.named_build_row(job, build).await? else { return Ok(Vec::new()) };
        if expired {
            return self.expired_build_results(row).await;
        }
        let rows = sqlx::query(
            "SELECT te.suite, te.name, t.status, t.duration_seconds, t.failure_message \
             FROM test_results t JOIN tests te ON te.id = t.test_id WHERE t.build_id = $1 ORDER BY t.id",
        )
        .bind(row)
        .fetch_all(&self.pool)
        .await
        .map_err(self.err("list a build's results"))?;
        rows.iter().map(|r| self.test_result(r, 0)).collect()
    }

    /// The files of a build (as [`Index::build`] names it) that could not be read.
    pub async fn build_problems(&self, job: &str, build: &str) -> Result<Vec<Problem>> {
        let sql = format!(
            "SELECT pr.file, pr.message FROM build_problems pr WHERE pr.build_id = {NAMED_BUILD} ORDER BY pr.id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job)
            .bind(build)
            .fetch_all(&self.pool)
            .await
            .map_err(self.err("list a build's problems"))?;
        rows.iter().map(|r| self.decode(|| Ok(Problem { file: r.try_get(0)?, message: r.try_get(1)? }))).collect()
    }

    /// The whole index by natural keys (see [`Snapshot`]).
    pub async fn snapshot(&self) -> Result<Snapshot> {
        let sql = format!("SELECT {BUILD_COLUMNS} FROM {BUILD_FROM} ORDER BY j.name, b.build, b.path");
        let rows =
            sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&self.pool).await.map_err(self.err("list builds"))?;
        let builds = rows.iter().map(|r| self.build_row(r)).collect::<Result<Vec<_>>>()?;
        let rows = sqlx::query(
            "SELECT j.name, b.build, te.suite, te.name, t.status, t.duration_seconds, t.failure_message \
             FROM test_results t JOIN tests te ON te.id = t.test_id JOIN builds b ON b.id = t.build_id \
             JOIN jobs j ON j.id = b.job_id ORDER BY j.name, b.build, b.path, t.id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(self.err("list test results"))?;
        let results = rows
            .iter()
            .map(|r| {
                let (job, build) = self.decode(|| Ok((r.try_get(0)?, r.try_get(1)?)))?;
                Ok((job, build, self.test_result(r, 2)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let problems = self
            .fetch_rows(
                "SELECT j.name, b.build, pr.file, pr.message FROM build_problems pr JOIN builds b ON b.id = pr.build_id \
                 JOIN jobs j ON j.id = b.job_id ORDER BY j.name, b.build, b.path, pr.id",
                "list problems",
                |r| Ok((r.try_get(0)?, r.try_get(1)?, Problem { file: r.try_get(2)?, message: r.try_get(3)? })),
            )
            .await?;
        Ok(Snapshot { builds, results, problems })
    }

    /// What the LKG computation reads: every finished build, in the order they started, every
    /// test, and each test result as (build row, test row, status). Holds every result row: the
    /// LKG loader streams them instead ([`Index::for_each_lkg_result`]).
    pub async fn lkg_rows(&self) -> Result<LkgRows> {
        let builds = self.lkg_builds().await?;
        let tests = self.lkg_tests().await?;
        let mut results = Vec::new();
        self.for_each_lkg_result(None, |build, test, status| results.push((build, test, status))).await?;
        Ok(LkgRows { builds, tests, results })
    }

    /// Every finished build, in the order they started (then by row), but those whose result is
    /// `ERROR` (Prow's result for a job that could not test anything: no verdict either way).
    pub async fn lkg_builds(&self) -> Result<Vec<LkgBuild>> {
        let mut builds = Vec::new();
        self.for_each_lkg_build(|build| builds.push(build)).await?;
        Ok(builds)
    }

    /// [`Index::lkg_builds`] of the jobs named alone.
    pub async fn lkg_builds_of(&self, jobs: &[String]) -> Result<Vec<LkgBuild>> {
        let mut builds = Vec::new();
        for chunk in jobs.chunks(500) {
            let names = (1..=chunk.len()).map(|n| format!("${n}")).collect::<Vec<_>>().join(", ");
            self.lkg_builds_where(&format!("AND j.name IN ({names})"), chunk, |build| builds.push(build)).await?;
        }
        builds.sort_by_key(|b| (b.started_at, b.row));
        Ok(builds)
    }

    /// Each job's generation (bumped whenever one of its builds is indexed or replaced), by name.
    pub async fn job_generations(&self) -> Result<HashMap<String, i64>> {
        let rows = self.fetch_rows("SELECT name, generation FROM jobs", "list job generations", |r| {
            Ok((r.try_get(0)?, r.try_get(1)?))
        });
        Ok(rows.await?.into_iter().collect())
    }

    /// [`Index::lkg_builds`], each build handed to `visit` as it arrives: no row is held, so
    /// memory stays what `visit` keeps.
    pub async fn for_each_lkg_build(&self, visit: impl FnMut(LkgBuild)) -> Result<()> {
        self.lkg_builds_where("", &[], visit).await
    }

    /// `condition` is static text with placeholders for `names`.
    async fn lkg_builds_where(&self, condition: &str, names: &[String], mut visit: impl FnMut(LkgBuild)) -> Result<()> {
        let sql = format!(
            "SELECT b.id, j.name, b.build, p.name, b.kubernetes_version, b.provider_version, b.artifacts_url, \
             b.started_at, b.passed, b.job_version, b.repo_commit, b.repos, b.digest FROM builds b \
             JOIN jobs j ON j.id = b.job_id LEFT JOIN providers p ON p.id = j.provider_id \
             WHERE b.state = 'finished' AND (b.result IS NULL OR b.result <> 'ERROR') {condition} \
             ORDER BY b.started_at, b.id"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for name in names {
            query = query.bind(name);
        }
        let mut rows = query.fetch(&self.pool);
        while let Some(r) =
            futures::TryStreamExt::try_next(&mut rows).await.map_err(self.err("list finished builds"))?
        {
            visit(self.decode(|| {
                Ok(LkgBuild {
                    row: r.try_get(0)?,
                    job: r.try_get(1)?,
                    build: r.try_get(2)?,
                    provider: r.try_get(3)?,
                    kubernetes_version: r.try_get(4)?,
                    provider_version: r.try_get(5)?,
                    artifacts_url: r.try_get(6)?,
                    started_at: r.try_get(7)?,
                    passed: get_bool(&r, "passed")?,
                    job_version: r.try_get(9)?,
                    repo_commit: r.try_get(10)?,
                    repos: r
                        .try_get::<Option<String>, _>(11)?
                        .and_then(|json| serde_json::from_str(&json).ok())
                        .unwrap_or_default(),
                    digest: r.try_get(12)?,
                })
            })?);
        }
        Ok(())
    }

    /// Every test: `(row, name)`, by row.
    pub async fn lkg_tests(&self) -> Result<Vec<(i64, String)>> {
        self.fetch_rows("SELECT id, name FROM tests ORDER BY id", "list tests", |r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .await
    }

    /// Hands each test result (build row, test row, status) to `visit` as it arrives, in insertion
    /// order within each build: of every build (`None`), or of the builds named. No row is held,
    /// so memory stays what `visit` keeps whatever the index holds.
    pub async fn for_each_lkg_result(
        &self,
        builds: Option<&[i64]>,
        mut visit: impl FnMut(i64, i64, TestStatus),
    ) -> Result<()> {
        // In insertion order overall (the primary key's order, no sort of the whole table), which
        // is insertion order within each build.
        const ALL: &str = "SELECT build_id, test_id, status FROM test_results ORDER BY id";
        let queries: Vec<String> = match builds {
            None => vec![ALL.to_owned()],
            Some(rows) => rows
                .chunks(RESULT_BUILDS_PER_QUERY)
                .map(|chunk| {
                    let ids = row_list(chunk);
                    format!(
                        "SELECT build_id, test_id, status FROM test_results WHERE build_id IN ({ids}) ORDER BY build_id, id"
                    )
                })
                .collect(),
        };
        for sql in queries {
            // Static text but for row ids, which are integers.
            let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(builds.is_none()).fetch(&self.pool);
            while let Some(row) =
                futures::TryStreamExt::try_next(&mut rows).await.map_err(self.err("list test results"))?
            {
                let (build, test, status): (i64, i64, &str) =
                    self.decode(|| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))?;
                let parsed = TestStatus::parse(status)
                    .ok_or_else(|| self.bad_value("test_results.status", status.to_owned()))?;
                visit(build, test, parsed);
            }
        }
        Ok(())
    }

    /// Every row of a static query, each decoded by `decode`.
    async fn fetch_rows<T>(
        &self,
        sql: &'static str,
        action: &'static str,
        decode: impl Fn(&AnyRow) -> std::result::Result<T, sqlx::Error>,
    ) -> Result<Vec<T>> {
        let rows = sqlx::query(sql).fetch_all(&self.pool).await.map_err(self.err(action))?;
        rows.iter().map(|r| self.decode(|| decode(r))).collect()
    }

    /// A cached answer of a commit history source: `(etag, next page URL, body, fetched_at)`.
    pub async fn cached_history(&self, key: &str) -> Result<Option<(Option<String>, Option<String>, String, i64)>> {
        let row = sqlx::query("SELECT etag, next_url, body, fetched_at FROM history_cache WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("read the history cache"))?;
        row.map(|r| self.decode(|| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))).transpose()
    }

    /// Keeps (or replaces) a commit history source's answer.
    pub async fn cache_history(
        &self,
        key: &str,
        etag: Option<&str>,
        next_url: Option<&str>,
        body: &str,
        fetched_at: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO history_cache (key, etag, next_url, body, fetched_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (key) DO UPDATE SET etag = excluded.etag, next_url = excluded.next_url, \
             body = excluded.body, fetched_at = excluded.fetched_at",
        )
        .bind(key)
        .bind(etag)
        .bind(next_url)
        .bind(body)
        .bind(fetched_at)
        .execute(&self.pool)
        .await
        .map_err(self.err("write the history cache"))?;
        Ok(())
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(self.err("reach the database"))?;
        Ok(())
    }

    /// Counts of rows: builds, test results.
    pub async fn counts(&self) -> Result<(i64, i64)> {
        let row = sqlx::query("SELECT (SELECT COUNT(*) FROM builds), (SELECT COUNT(*) FROM test_results)")
            .fetch_one(&self.pool)
            .await
            .map_err(self.err("count rows"))?;
        self.decode(|| Ok((row.try_get(0)?, row.try_get(1)?)))
    }

    /// Every build's directory and state: what [`crate::publish::reindex_missing`]
    /// compares with the store.
    pub async fn build_states(&self) -> Result<Vec<(String, State)>> {
        let rows: Vec<(String, String)> = self
            .fetch_rows("SELECT path, state FROM builds", "list the builds' states", |r| {
                Ok((r.try_get(0)?, r.try_get(1)?))
            })
            .await?;
        rows.into_iter()
            .map(|(path, state)| match State::parse(&state) {
                Some(state) => Ok((path, state)),
                None => Err(self.bad_value("builds.state", state)),
            })
            .collect()
    }

    fn build_row(&self, r: &AnyRow) -> Result<BuildInfo> {
        let state: String = self.decode(|| r.try_get("state"))?;
        let state = State::parse(&state).ok_or_else(|| self.bad_value("builds.state", state))?;
        self.decode(|| {
            Ok(BuildInfo {
                job: r.try_get("job")?,
                build: r.try_get("build")?,
                path: r.try_get("path")?,
                pull: r.try_get("pull")?,
                provider: r.try_get("provider")?,
                state,
                started_at: r.try_get("started_at")?,
                finished_at: r.try_get("finished_at")?,
                passed: get_bool(r, "passed")?,
                result: r.try_get("result")?,
                versions: Versions {
                    kubernetes_version: r.try_get("kubernetes_version")?,
                    provider: r.try_get("provider")?,
                    provider_version: r.try_get("provider_version")?,
                    ccm_version: r.try_get("ccm_version")?,
                    job_version: r.try_get("job_version")?,
                    repo_commit: r.try_get("repo_commit")?,
                    repos: Default::default(),
                },
                artifacts_url: r.try_get("artifacts_url")?,
                digest: r.try_get("digest")?,
            })
        })
    }

    /// A test result from five columns starting at `first`: suite, name, status, duration, message.
    fn test_result(&self, r: &AnyRow, first: usize) -> Result<TestResult> {
        let status: String = self.decode(|| r.try_get(first + 2))?;
        let status = TestStatus::parse(&status).ok_or_else(|| self.bad_value("test_results.status", status))?;
        self.decode(|| {
            Ok(TestResult {
                suite: r.try_get(first)?,
                name: r.try_get(first + 1)?,
                status,
                duration_seconds: r.try_get(first + 3)?,
                message: r.try_get(first + 4)?,
            })
        })
    }

    fn decode<T>(&self, f: impl FnOnce() -> std::result::Result<T, sqlx::Error>) -> Result<T> {
        f().map_err(self.err("decode a row"))
    }

    fn bad_value(&self, column: &'static str, value: String) -> IndexError {
        IndexError::BadValue { database: self.name.clone(), column, value }
    }
}

/// Binds a build row's 16 columns, in the order of the `builds` table.
fn bind_build<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
    job_id: i64,
    b: &'q BuildInfo,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments> {
    let v = &b.versions;
    query
        .bind(job_id)
        .bind(&b.build)
        .bind(&b.path)
        .bind(&b.pull)
        .bind(b.state.as_str())
        .bind(b.started_at)
        .bind(b.finished_at)
        .bind(b.passed)
        .bind(&b.result)
        .bind(&v.kubernetes_version)
        .bind(&v.provider_version)
        .bind(&v.ccm_version)
        .bind(&v.job_version)
        .bind(&v.repo_commit)
        .bind(&b.artifacts_url)
        .bind(&b.digest)
        .bind((!v.repos.is_empty()).then(|| serde_json::to_string(&v.repos).expect("a map of strings serialises")))
}

/// Test ids by suite, then name.
type TestIds = HashMap<String, HashMap<String, i64>>;

/// Past this many, the cache of known test ids starts over (memory stays bounded on an index
/// holding every test ever run; the ids are looked up again as builds need them).
const MAX_KNOWN_TESTS: usize = 200_000;

fn lookup(ids: &TestIds, suite: &str, name: &str) -> Option<i64> {
    ids.get(suite)?.get(name).copied()
}

/// A [`VersionedBuild`] from the columns of that name.
fn versioned_build(r: &AnyRow) -> std::result::Result<VersionedBuild, sqlx::Error> {
    Ok(VersionedBuild {
        provider: r.try_get("provider")?,
        job: r.try_get("job")?,
        build: r.try_get("build")?,
        kubernetes_version: r.try_get("kubernetes_version")?,
        provider_version: r.try_get("provider_version")?,
        started_at: r.try_get("started_at")?,
        passed: get_bool(r, "passed")?,
    })
}

/// A boolean column: Postgres's `BOOLEAN`, or SQLite's `INTEGER` 0/1.
fn get_bool(r: &AnyRow, column: &str) -> std::result::Result<Option<bool>, sqlx::Error> {
    match r.try_get::<Option<bool>, _>(column) {
        Ok(v) => Ok(v),
        Err(_) => Ok(r.try_get::<Option<i64>, _>(column)?.map(|v| v != 0)),
    }
}

/// Row ids as an SQL list (`1, 2, 3`). They are the index's own integers, so they are written into
/// the statement rather than bound: one statement then takes hundreds of them on either database.
fn row_list(rows: &[i64]) -> String {
    rows.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
}

/// `($1, $2), ($3, $4)` for `rows` rows of `columns` columns.
fn placeholders(rows: usize, columns: usize) -> String {
    let mut sql = String::with_capacity(rows * columns * 5);
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for col in 0..columns {
            if col > 0 {
                sql.push_str(", ");
            }
            sql.push('$');
            sql.push_str(&(row * columns + col + 1).to_string());
        }
        sql.push(')');
    }
    sql
}

/// The backend a URL names, and the URL sqlx should open: a SQLite URL gets `mode=rwc` (create the
/// file) and its directory is created.
fn normalise_url(url: &str) -> Result<(Backend, String)> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_owned()));
    }
    let Some(rest) = url.strip_prefix("sqlite:") else { return Err(IndexError::BadUrl { url: url.to_owned() }) };
    let path = rest.trim_start_matches("//");
    let (file, query) = path.split_once('?').unwrap_or((path, ""));
    if file.is_empty() {
        return Err(IndexError::BadUrl { url: url.to_owned() });
    }
    if file != ":memory:"
        && let Some(dir) = Path::new(file).parent().filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).map_err(|source| IndexError::CreateDir { dir: dir.to_path_buf(), source })?;
    }
    let query = if query.contains("mode=") { query.to_owned() } else { [query, "mode=rwc"].join("&") };
    Ok((Backend::Sqlite, format!("sqlite://{file}?{}", query.trim_start_matches('&'))))
}

/// The file of a `sqlite:` URL (`sqlite://path?mode=…`, `sqlite:path`); `None` for another URL.
fn sqlite_file(url: &str) -> Option<String> {
    let rest = url.strip_prefix("sqlite:")?;
    let path = rest.trim_start_matches("//");
    Some(path.split_once('?').map_or(path, |(file, _)| file).to_owned()).filter(|file| !file.is_empty())
}

/// An exclusive lock on `<database file>.lock`, held until dropped (`:memory:` needs none).
async fn lock_beside(url: &str) -> Result<Option<std::fs::File>> {
    let file = url.trim_start_matches("sqlite://").split('?').next().unwrap_or_default().to_owned();
    if file.is_empty() || file == ":memory:" {
        return Ok(None);
    }
    let path = std::path::PathBuf::from(format!("{file}.lock"));
    let lock_path = path.clone();
    let lock = tokio::task::spawn_blocking(move || {
        let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path)?;
        lock.lock()?;
        Ok::<_, std::io::Error>(lock)
    });
    match lock.await {
        Ok(Ok(lock)) => Ok(Some(lock)),
        Ok(Err(source)) => Err(IndexError::Lock { path, source }),
        Err(e) => Err(IndexError::Lock { path, source: std::io::Error::other(e) }),
    }
}

/// The URL with any password replaced, for messages.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (authority, tail) = rest.split_once('/').map_or((rest, ""), |(a, t)| (a, t));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}/{tail}")
        }
        _ => url.to_owned(),
    }
}

mod claims;
mod lkg_versions;
mod migrations;
mod packed_cells;
mod retention;
mod verdicts;
/// A finished build of a job and its test counts (see [`Index::job_trends`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrendRow {
    pub job: String,
    pub build: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub passed: Option<bool>,
    pub passed_tests: i64,
    pub ran_tests: i64,
}

#[cfg(test)]
mod tests;
mod tokens;

/// Builds a statement of [`Index::suite_results`] reads: a conformance build's packed row is
/// ~20 KB.
const PACKED_SUITE_BUILDS: usize = 200;

/// One result of a suite's table ([`Index::suite_results`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteResultRow {
    /// The build's row id.
    pub build_id: i64,
    pub test_id: i64,
    pub status: TestStatus,
    /// A failure's message or a skip's reason.
    pub message: Option<String>,
}

/// A finished build that names its provider and Kubernetes version (the rows of the dashboard's
/// matrix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedBuild {
    pub provider: String,
    pub job: String,
    pub build: String,
    pub kubernetes_version: String,
    pub provider_version: Option<String>,
    pub started_at: i64,
    /// `None` when finished.json said neither (an aborted build, say).
    pub passed: Option<bool>,
}

pub use claims::{Claim, ClaimSeen};
pub use lkg_versions::LkgRecorded;
pub use packed_cells::GridBuild;
pub use retention::Expired;
pub use tokens::TokenInfo;
pub use verdicts::{PackedResults, StoredVerdict};
