//! Helpers for tests of this crate and of the end-to-end tests: not for production use.

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
