//! Publishing: a local build directory uploaded to the store in the Prow layout, then indexed; and
//! re-indexing: the whole store read back into the SQL index (the store is the source of truth).
//!
//! The index is always filled from what is in the store, never from the local copy, so publishing
//! and re-indexing give the same rows by construction. Upload order follows Prow's: everything
//! else first, `finished.json` last (a reader that sees it sees a complete build), then
//! `latest-build.txt`, which only ever moves forward.
//!
//! A build posted to the ingestion API is what that post says, nothing else: the files an earlier
//! post left in its directory and this one does not hold are removed before its `finished.json`
//! is written ([`publish_files`]). Who may write a directory at all is decided before, by a claim
//! (`serve::claims`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use futures::{StreamExt, TryStreamExt, stream};

use super::index::{Index, IndexError, Indexed};
use super::layout::{self, BuildLocation, FINISHED_JSON, LayoutError, STARTED_JSON, Started, object_path};
use super::record::{self, BuildRecord, Problem, ReadBuildOptions, RecordError, State};
use super::store::{Put, ResultStore, StoreError};

/// Objects uploaded at once.
const UPLOADS_IN_FLIGHT: usize = 8;
/// Builds read from the store at once while re-indexing.
const READS_IN_FLIGHT: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(
        "{dir}: not a build directory: {STARTED_JSON} is missing (pass the directory that holds started.json, finished.json and artifacts/)"
    )]
    MissingStarted { dir: PathBuf },
    #[error("{file}: not what TestGrid expects: {source}")]
    BadStarted { file: PathBuf, source: serde_json::Error },
    #[error("{dir}: cannot read the build directory: {source}")]
    ReadDir { dir: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

impl PublishError {
    /// Whether publishing again later may succeed: the store or the index could not be reached, or
    /// was busy ([`StoreError::is_transient`], [`IndexError::is_transient`]). A build directory, a
    /// name or a setting that is wrong stays wrong. Publishing again is safe either way: it writes
    /// only what the store lacks, and indexes the build once.
    pub fn is_transient(&self) -> bool {
        match self {
            PublishError::Store(e) | PublishError::Record(RecordError::Store(e)) => e.is_transient(),
            PublishError::Index(e) => e.is_transient(),
            PublishError::MissingStarted { .. }
            | PublishError::BadStarted { .. }
            | PublishError::ReadDir { .. }
            | PublishError::Layout(_)
            | PublishError::Record(RecordError::MissingStarted { .. } | RecordError::BadStarted { .. }) => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, PublishError>;

/// What [`publish`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    pub url: String,
    pub written: usize,
    pub unchanged: usize,
    pub indexed: Indexed,
    pub record: BuildRecord,
}

impl Published {
    /// Files of the build that could not be read (the rest was indexed).
    pub fn problems(&self) -> &[Problem] {
        &self.record.problems
    }
}

/// Uploads a local build directory (`started.json`, `finished.json`, `build-log.txt`,
/// `artifacts/…`) to `location` in the store, then indexes it from there.
pub async fn publish(
    store: &ResultStore,
    index: &Index,
    dir: &Path,
    location: &BuildLocation,
    opts: &ReadBuildOptions,
) -> Result<Published> {
    check_started(dir)?;
    let mut files = Vec::new();
    collect_files(dir, Path::new(""), &mut files)?;
    check_holds(store, location, files.iter().map(|f| object_path(f)))?;
    let base = location.object_dir();
    let upload = |relative: PathBuf| {
        let object = format!("{base}/{}", object_path(&relative));
        let local = dir.join(&relative);
        async move { store.upload_file_if_changed(&object, &local).await }
    };
    let puts = put_finished_last(files, |f| f == Path::new(FINISHED_JSON), upload, async { Ok(()) }).await?;
    index_written(store, index, location, opts, puts).await
}

/// Publishes a build held in memory (an upload to the ingestion API) as [`publish`] does a local
/// directory: every file but `finished.json` first, then the removal of every other file of the
/// build directory (an earlier post's), then `finished.json`, then `latest-build.txt`, then the
/// index, read from the store. `files` are relative to the build directory, their paths checked by
/// [`upload::check_path`]. The caller holds the directory's claim.
pub async fn publish_files(
    store: &ResultStore,
    index: &Index,
    files: &[upload::UploadedFile],
    location: &BuildLocation,
    opts: &ReadBuildOptions,
) -> Result<Published> {
    check_holds(store, location, files.iter().map(|f| f.path.clone()))?;
    let base = location.object_dir();
    let upload = |file: &upload::UploadedFile| {
        let object = format!("{base}/{}", file.path);
        let bytes = file.bytes.clone();
        async move { store.put_if_changed(&object, bytes).await }
    };
    let keep: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let others = remove_others(store, &base, &keep);
    let puts = put_finished_last(files.iter().collect(), |f| f.path == FINISHED_JSON, upload, others).await?;
    index_written(store, index, location, opts, puts).await
}

/// Deletes every object under the build directory `base` whose path in it is not in `keep`.
async fn remove_others(store: &ResultStore, base: &str, keep: &HashSet<&str>) -> Result<()> {
    for entry in store.list(base).await? {
        let relative = entry.path.strip_prefix(base).and_then(|p| p.strip_prefix('/')).unwrap_or(&entry.path);
        if !keep.contains(relative) {
            store.delete(&entry.path).await?;
        }
    }
    Ok(())
}

/// Checks that the store can hold every object the build would write (its files, relative to the
/// build directory, and `latest-build.txt`), before any is written: a build is written whole or not
/// at all.
pub fn check_holds(store: &ResultStore, location: &BuildLocation, files: impl Iterator<Item = String>) -> Result<()> {
    let base = location.object_dir();
    for file in files {
        store.holds(&format!("{base}/{file}"))?;
    }
    for file in location.latest_build_files().into_iter().chain(location.alias_file()) {
        store.holds(&object_path(&file))?;
    }
    Ok(())
}

/// Writes every file with `put`, several at once, then runs `before_finished`, then writes
/// `finished.json`: its presence tells readers the build is complete.
async fn put_finished_last<T, F, Fut>(
    files: Vec<T>,
    is_finished: impl Fn(&T) -> bool,
    put: F,
    before_finished: impl std::future::Future<Output = Result<()>>,
) -> Result<Vec<Put>>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<Put, StoreError>>,
{
    let (finished, rest): (Vec<T>, Vec<T>) = files.into_iter().partition(|f| is_finished(f));
    let mut puts: Vec<Put> =
        stream::iter(rest.into_iter().map(&put)).buffer_unordered(UPLOADS_IN_FLIGHT).try_collect().await?;
    before_finished.await?;
    for file in finished {
        puts.push(put(file).await?);
    }
    Ok(puts)
}

/// Moves `latest-build.txt` forward and indexes the build from what the store now holds.
async fn index_written(
    store: &ResultStore,
    index: &Index,
    location: &BuildLocation,
    opts: &ReadBuildOptions,
    puts: Vec<Put>,
) -> Result<Published> {
    advance_latest_build(store, location).await?;
    let mut published = index_stored(store, index, location, opts).await?;
    published.written = puts.iter().filter(|p| **p == Put::Written).count();
    published.unchanged = puts.len() - published.written;
    Ok(published)
}

/// Indexes the build the store holds at `location` (nothing written).
pub async fn index_stored(
    store: &ResultStore,
    index: &Index,
    location: &BuildLocation,
    opts: &ReadBuildOptions,
) -> Result<Published> {
    let record = record::read_build(store, location, opts).await?;
    let indexed = index.index_build(&record).await?;
    let url = store.url_of(&location.object_dir());
    Ok(Published { url, written: 0, unchanged: 0, indexed, record })
}

/// The files of `files` the store holds with other content at `location` (a build published
/// before under the same id with something else).
pub async fn differing_files(
    store: &ResultStore,
    files: &[upload::UploadedFile],
    location: &BuildLocation,
) -> Result<Vec<String>> {
    let base = location.object_dir();
    let mut differing = Vec::new();
    for file in files {
        if store.get(&format!("{base}/{}", file.path)).await?.as_ref() != Some(&file.bytes) {
            differing.push(file.path.clone());
        }
    }
    Ok(differing)
}

/// What [`reindex`] did.
#[derive(Debug, Default)]
pub struct Reindexed {
    pub inserted: usize,
    pub replaced: usize,
    pub unchanged: usize,
    /// Builds that could not be indexed at all (no `started.json`, say), with why.
    pub failed: Vec<String>,
    /// Files that could not be read in builds that were indexed: `(build URL, problem)`.
    pub problems: Vec<(String, Problem)>,
}

/// Reads every build in the store into the index. A build that cannot be read is reported and
/// skipped; the others are still indexed.
pub async fn reindex(store: &ResultStore, index: &Index, opts: &ReadBuildOptions) -> Result<Reindexed> {
    let (locations, failed) = builds_in_store(store).await?;
    index_locations(store, index, opts, locations, failed).await
}

/// [`reindex`] for the periodic builds of `jobs` only (`logs/<job>/…`): what a provider's existing
/// Prow jobs left in a bucket that holds many other jobs.
pub async fn reindex_jobs(
    store: &ResultStore,
    index: &Index,
    opts: &ReadBuildOptions,
    jobs: &[String],
) -> Result<Reindexed> {
    let (mut locations, mut failed) = (Vec::new(), Vec::new());
    for job in jobs {
        for build in store.list_dirs(&format!("logs/{job}")).await? {
            match BuildLocation::periodic(job, &build) {
                Ok(location) => locations.push(location),
                Err(e) => failed.push(format!("{}: {e}", store.url_of(&format!("logs/{job}/{build}")))),
            }
        }
    }
    index_locations(store, index, opts, locations, failed).await
}

/// Indexes what the store holds and the index lacks, as [`reindex`] does everything, but cheaply:
/// it lists the build directories and reads only those the index lacks, those it holds as running,
/// and those it holds as aborted that have a `finished.json` now (a finishing write whose indexing
/// never happened). Directories in `skip` (being written right now) are left alone.
pub async fn reindex_missing(
    store: &ResultStore,
    index: &Index,
    opts: &ReadBuildOptions,
    skip: &HashSet<String>,
) -> Result<Reindexed> {
    let (locations, failed) = builds_in_store(store).await?;
    let states: HashMap<String, State> = index.build_states().await?.into_iter().collect();
    let mut stale = Vec::new();
    for location in locations {
        let path = location.object_dir();
        let read = match states.get(&path) {
            _ if skip.contains(&path) => false,
            None | Some(State::Running) => true,
            Some(State::Finished) => false,
            Some(State::Aborted) => store.size(&format!("{path}/{FINISHED_JSON}")).await?.is_some(),
        };
        if read {
            stale.push(location);
        }
    }
    index_locations(store, index, opts, stale, failed).await
}

/// Reads each build at `locations` into the index (see [`reindex`]).
async fn index_locations(
    store: &ResultStore,
    index: &Index,
    opts: &ReadBuildOptions,
    locations: Vec<BuildLocation>,
    mut failed: Vec<String>,
) -> Result<Reindexed> {
    let mut report = Reindexed::default();
    let mut records = stream::iter(locations)
        .map(|location| async move { (record::read_build(store, &location, opts).await, location) })
        .buffered(READS_IN_FLIGHT);
    while let Some((record, location)) = records.next().await {
        let record = match record {
            Ok(record) => record,
            Err(RecordError::Store(e)) => return Err(e.into()),
            Err(e) => {
                tracing::warn!(build = %store.url_of(&location.object_dir()), "{e}");
                failed.push(e.to_string());
                continue;
            }
        };
        match index.index_build(&record).await? {
            Indexed::Inserted => report.inserted += 1,
            Indexed::Replaced => report.replaced += 1,
            Indexed::Unchanged => report.unchanged += 1,
        }
        report.problems.extend(record.problems.iter().map(|p| (record.info.artifacts_url.clone(), p.clone())));
    }
    report.failed = failed;
    Ok(report)
}

/// Every build directory in the store: `logs/<job>/<build>` and
/// `pr-logs/pull/<org_repo>/<pr>/<job>/<build>`. Directories whose names cannot be a job, build or
/// PR are returned as messages.
pub async fn builds_in_store(store: &ResultStore) -> Result<(Vec<BuildLocation>, Vec<String>)> {
    let (mut found, mut bad) = (Vec::new(), Vec::new());
    for job in store.list_dirs("logs").await? {
        for build in store.list_dirs(&format!("logs/{job}")).await? {
            match BuildLocation::periodic(&job, &build) {
                Ok(location) => found.push(location),
                Err(e) => bad.push(format!("{}: {e}", store.url_of(&format!("logs/{job}/{build}")))),
            }
        }
    }
    for org_repo in store.list_dirs("pr-logs/pull").await? {
        for pr in store.list_dirs(&format!("pr-logs/pull/{org_repo}")).await? {
            let prefix = format!("pr-logs/pull/{org_repo}/{pr}");
            let Ok(pr_number) = pr.parse::<u64>() else {
                bad.push(format!("{}: not a pull request number", store.url_of(&prefix)));
                continue;
            };
            for job in store.list_dirs(&prefix).await? {
                for build in store.list_dirs(&format!("{prefix}/{job}")).await? {
                    match BuildLocation::presubmit(&org_repo, pr_number, &job, &build) {
                        Ok(location) => found.push(location),
                        Err(e) => bad.push(format!("{}: {e}", store.url_of(&format!("{prefix}/{job}/{build}")))),
                    }
                }
            }
        }
    }
    Ok((found, bad))
}

/// Points each `latest-build.txt` of the build's job at it, unless it names a newer build, and
/// writes a presubmit's alias (`pr-logs/directory/<job>/<build>.txt`, the build's URL), as Prow does.
async fn advance_latest_build(store: &ResultStore, location: &BuildLocation) -> Result<()> {
    if let Some(alias) = location.alias_file() {
        let url = store.url_of(&location.object_dir());
        store.put_if_changed(&object_path(&alias), url.into_bytes().into()).await?;
    }
    for file in location.latest_build_files() {
        let path = object_path(&file);
        let current = store.get(&path).await?.map(|b| String::from_utf8_lossy(&b).trim().to_owned());
        let newer = current.as_deref().is_some_and(|c| layout::natural_cmp(c, location.build()).is_gt());
        if !newer {
            store.put_if_changed(&path, location.build().as_bytes().to_vec().into()).await?;
        }
    }
    Ok(())
}

pub(crate) fn check_started(dir: &Path) -> Result<()> {
    let file = dir.join(STARTED_JSON);
    let bytes = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PublishError::MissingStarted { dir: dir.to_path_buf() });
        }
        Err(source) => return Err(PublishError::ReadDir { dir: dir.to_path_buf(), source }),
    };
    serde_json::from_slice::<Started>(&bytes).map_err(|source| PublishError::BadStarted { file, source })?;
    Ok(())
}

/// Every file under `dir`, relative, sorted; skips the `.name.partial` files of a writer at work.
/// A symlink to a file is published as that file; a symlink to a directory is not followed (it
/// could loop; what it names under `dir` is published where it lies: a mounted ConfigMap's
/// `..data`), nor is a dangling one.
pub(crate) fn collect_files(dir: &Path, relative: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let here = dir.join(relative);
    let read_err = |source| PublishError::ReadDir { dir: here.clone(), source };
    let mut entries: Vec<_> =
        std::fs::read_dir(&here).map_err(read_err)?.collect::<std::io::Result<_>>().map_err(read_err)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let rel = relative.join(&name);
        let file_type = entry.file_type().map_err(read_err)?;
        if file_type.is_dir() {
            collect_files(dir, &rel, found)?;
        } else if file_type.is_symlink() && !std::fs::metadata(entry.path()).is_ok_and(|target| target.is_file()) {
            continue;
        } else if !name.to_string_lossy().ends_with(".partial") {
            found.push(rel);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A build directory as `harness run` leaves it, with one JUnit file of two tests.
    fn build_dir(root: &Path) -> PathBuf {
        let dir = root.join("build");
        std::fs::create_dir_all(dir.join("artifacts")).unwrap();
        std::fs::write(dir.join(STARTED_JSON), r#"{"timestamp": 1700000000}"#).unwrap();
        std::fs::write(dir.join("build-log.txt"), "ok\n").unwrap();
        let junit = r#"<testsuite name="s" tests="2" failures="1"><testcase name="a"/><testcase name="b"><failure message="no">no</failure></testcase></testsuite>"#;
        std::fs::write(dir.join("artifacts/junit_01.xml"), junit).unwrap();
        std::fs::write(dir.join(FINISHED_JSON), r#"{"timestamp": 1700000600, "passed": false, "result": "FAILURE"}"#)
            .unwrap();
        dir
    }

    #[tokio::test]
    async fn a_publish_cut_off_after_the_store_is_completed_by_the_next_and_a_third_changes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = build_dir(tmp.path());
        let store = ResultStore::open_dir(&tmp.path().join("store")).unwrap();
        let sqlite = format!("sqlite://{}", tmp.path().join("index.sqlite").display());
        let location = BuildLocation::periodic("ci-j", "7").unwrap();
        let ended = ReadBuildOptions { unfinished: record::Unfinished::Aborted, ..ReadBuildOptions::default() };

        // The store is written, then the index is gone: half published.
        let gone = Index::open(&sqlite).await.unwrap();
        gone.close().await;
        let cut = publish(&store, &gone, &dir, &location, &ended).await.unwrap_err();
        assert!(matches!(cut, PublishError::Index(_)) && !cut.is_transient(), "{cut}");
        assert!(store.get("logs/ci-j/7/finished.json").await.unwrap().is_some(), "the store was written");

        let index = Index::open(&sqlite).await.unwrap();
        assert_eq!(index.counts().await.unwrap(), (0, 0));
        let completed = publish(&store, &index, &dir, &location, &ended).await.unwrap();
        assert_eq!((completed.written, completed.unchanged, completed.indexed), (0, 4, Indexed::Inserted));
        assert_eq!(index.counts().await.unwrap(), (1, 2));
        let again = publish(&store, &index, &dir, &location, &ended).await.unwrap();
        assert_eq!((again.written, again.indexed), (0, Indexed::Unchanged));
        assert_eq!(index.counts().await.unwrap(), (1, 2), "nothing indexed twice");
    }

    #[test]
    fn only_a_store_or_index_that_may_answer_later_is_worth_retrying() {
        let dir = PathBuf::from("/nowhere");
        assert!(!PublishError::MissingStarted { dir: dir.clone() }.is_transient());
        let unreadable = PublishError::ReadDir { dir, source: std::io::ErrorKind::TimedOut.into() };
        assert!(!unreadable.is_transient(), "a local directory is no network");
        let query = |source| IndexError::Query { database: "x".into(), action: "indexing", source };
        assert!(PublishError::Index(query(sqlx::Error::PoolTimedOut)).is_transient());
        assert!(!PublishError::Index(query(sqlx::Error::RowNotFound)).is_transient());
        let unholdable = StoreError::Unholdable { path: "a".into(), rule: "too long".into() };
        assert!(!PublishError::Store(unholdable).is_transient());
    }

    #[test]
    fn a_mounted_configmaps_symlinks_publish_each_file_once_where_it_lies_and_its_key_links() {
        // What the kubelet makes of a ConfigMap volume: key -> ..data/key, ..data -> ..<timestamp>.
        let dir = tempfile::tempdir().unwrap();
        let volume = dir.path().join("artifacts/config");
        std::fs::create_dir_all(volume.join("..2026_12_06_01_00_00.1")).unwrap();
        std::fs::write(volume.join("..2026_12_06_01_00_00.1/providers.yaml"), "x").unwrap();
        std::os::unix::fs::symlink("..2026_12_06_01_00_00.1", volume.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/providers.yaml", volume.join("providers.yaml")).unwrap();
        std::os::unix::fs::symlink("/no/such/file", volume.join("dangling")).unwrap();
        std::os::unix::fs::symlink("..", volume.join("loop")).unwrap();
        let mut found = Vec::new();
        collect_files(dir.path(), Path::new(""), &mut found).unwrap();
        let found: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            found,
            ["artifacts/config/..2026_12_06_01_00_00.1/providers.yaml", "artifacts/config/providers.yaml"]
        );
    }
}
