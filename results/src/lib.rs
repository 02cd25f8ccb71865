//! Results: where a run's outcome lands so that TestGrid, our dashboard and the LKG engine can read it.
//!
//! - [`layout`]: the Prow/GCS build layout TestGrid reads, on a local directory:
//!   `logs/<job>/<build>/{started.json, finished.json, build-log.txt, artifacts/junit_*.xml}`
//!   (presubmits under `pr-logs/pull/<org_repo>/<pr>/<job>/<build>/`), with `started.json` and
//!   `finished.json` shaped as TestGrid's `metadata/job.go` and its JUnit artifact name rule. The
//!   JUnit files themselves are read and written by the `junit` crate.
//! - [`store`]: the object store builds are published to (a local directory, `gs://`, `s3://`).
//! - [`record`]: a build read back from the store as the rows the index keeps.
//! - [`index`]: the SQL index (SQLite or Postgres) of builds and test results.
//! - [`publish`]: a local build directory to the store and the index; the store to the index.
//! - [`remote`]: a local build directory posted to a central `harness serve` instead.
//! - [`tokens`]: the publish tokens a central service accepts, stored hashed in the index.
//! - [`known_good`]: the LKG answers computed from the index, the commit histories they are placed
//!   on, and their exports (the one-line file, the store's marker objects).
//!
//! The contracts are in `docs/design.md`, "Results: the Prow/GCS layout TestGrid reads".

pub mod index;
pub mod known_good;
pub mod layout;
pub mod publish;
pub mod record;
pub mod remote;
pub mod store;
pub mod tokens;

use std::path::PathBuf;

/// Now, in seconds since the Unix epoch: how `started.json`, `finished.json` and the index keep time.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default()
}

/// Whether `error`, or one of its causes, is a network failure that waiting can heal: a connection
/// refused, reset or cut short, a host or network unreachable, a timeout. What publishing retries
/// ([`publish::PublishError::is_transient`]).
pub(crate) fn network_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.downcast_ref::<std::io::Error>().is_some_and(|e| transient_io(e.kind())) {
            return true;
        }
        if error.downcast_ref::<reqwest::Error>().is_some_and(|e| e.is_connect() || e.is_timeout()) {
            return true;
        }
        next = error.source();
    }
    false
}

/// The kinds of I/O error a network connection ends with when the other side is down, restarting or
/// out of reach.
pub(crate) fn transient_io(kind: std::io::ErrorKind) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        kind,
        ConnectionRefused
            | ConnectionReset
            | ConnectionAborted
            | NotConnected
            | BrokenPipe
            | TimedOut
            | UnexpectedEof
            | HostUnreachable
            | NetworkUnreachable
            | NetworkDown
    )
}

/// Where the embedded default keeps published builds and their index: `$HARNESS_DATA_DIR`, else
/// `~/.local/share/cloud-provider-harness`.
pub fn data_dir() -> PathBuf {
    match std::env::var_os("HARNESS_DATA_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => dirs::data_local_dir().unwrap_or_else(|| PathBuf::from(".")).join("cloud-provider-harness"),
    }
}

/// The default store: a local directory in the Prow layout.
pub fn default_store_url() -> String {
    data_dir().join("results").display().to_string()
}

/// The default index: a SQLite file beside the store.
pub fn default_database_url() -> String {
    format!("sqlite://{}", data_dir().join("index.sqlite").display())
}
