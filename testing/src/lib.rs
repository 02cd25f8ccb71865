//! Helpers for tests of this crate and of the end-to-end tests: not for production use.

pub mod central;
pub mod emulator;
pub mod fake_gcs;
pub mod go_tools;
pub mod host;
pub mod load;
pub mod registry;
pub mod testgrid;

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::Executor;

/// The variable naming the test Postgres server, which `scripts/postgres start` prints.
pub const POSTGRES_URL_VAR: &str = "HARNESS_TEST_POSTGRES_URL";

/// A new, empty database on the test Postgres server (`HARNESS_TEST_POSTGRES_URL`), so tests
/// running at once never see each other's rows. Panics, saying what to do, when no server is set.
pub async fn fresh_postgres_database() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let server = std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{POSTGRES_URL_VAR} is not set: the index is tested on Postgres too. \
             Run scripts/test, or start a server with `eval \"$(scripts/postgres start)\"`"
        )
    });
    sqlx::any::install_default_drivers();
    let mut admin = <sqlx::AnyConnection as sqlx::Connection>::connect(&server)
        .await
        .unwrap_or_else(|e| panic!("the test Postgres at {server} does not answer: {e}"));
    let name = format!("harness_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
    admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.expect("CREATE DATABASE");
    let (base, _) = server.rsplit_once('/').expect("a Postgres URL ends with /<database>");
    format!("{base}/{name}")
}

/// A Postgres server of the test's own (`scripts/postgres start`), for tests that stop and start
/// it: the shared one must stay up for the tests running beside them. Deleted when dropped.
pub struct OwnPostgres {
    /// `postgres://harness@127.0.0.1:PORT/postgres`.
    pub url: String,
    dir: String,
    script: std::path::PathBuf,
}

impl OwnPostgres {
    pub fn start() -> OwnPostgres {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres");
        let output = std::process::Command::new(&script).arg("start").output().expect("running scripts/postgres");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "scripts/postgres start: {}", String::from_utf8_lossy(&output.stderr));
        let export = |name: &str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(&format!("export {name}=")))
                .unwrap_or_else(|| panic!("scripts/postgres start printed no {name}: {stdout}"))
                .to_owned()
        };
        OwnPostgres { url: export(POSTGRES_URL_VAR), dir: export("HARNESS_TEST_POSTGRES_DIR"), script }
    }

    /// Stops the server (a fast shutdown: sessions are cut), keeping its data.
    pub fn down(&self) {
        self.run("down");
    }

    /// Starts it again on the same port.
    pub fn up(&self) {
        self.run("up");
    }

    fn run(&self, verb: &str) {
        let output = std::process::Command::new(&self.script)
            .arg(verb)
            .env("HARNESS_TEST_POSTGRES_DIR", &self.dir)
            .output()
            .expect("running scripts/postgres");
        assert!(output.status.success(), "scripts/postgres {verb}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let _ =
            std::process::Command::new(&self.script).arg("stop").env("HARNESS_TEST_POSTGRES_DIR", &self.dir).output();
    }
}

/// Writes an executable file (a stand-in script) that a test then runs. The file is written by a
/// child process (`install -m 0755`), not by the test process: a write descriptor opened here would
/// be inherited by any process another test thread forks at that moment, and running the file
/// while such a child still holds it fails with "Text file busy" (ETXTBSY).
pub fn write_executable(path: &std::path::Path, contents: &str) {
    let staged = path.with_extension("staged");
    std::fs::write(&staged, contents).unwrap_or_else(|e| panic!("writing {}: {e}", staged.display()));
    let status = std::process::Command::new("install")
        .args(["-m", "0755"])
        .arg(&staged)
        .arg(path)
        .status()
        .unwrap_or_else(|e| panic!("running install for {}: {e}", path.display()));
    assert!(status.success(), "install {} failed: {status}", path.display());
    std::fs::remove_file(&staged).unwrap_or_else(|e| panic!("removing {}: {e}", staged.display()));
}
