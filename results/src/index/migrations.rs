//! The index's schema migrations (`migrations/<backend>/`), embedded in the binary. Not through
//! `sqlx::migrate!`: its proc macro links sqlx's Postgres and SQLite drivers (SQLite's C sources,
//! rustls, ring, tokio) a second time, for the compiler, which made a cold build of the harness
//! about a minute longer on two cores. Each migration is resolved as sqlx resolves a directory
//! (`<version>_<description>.sql`, checksum of the text), so databases migrated by either agree;
//! a test checks both lists against the directories.

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::SqlStr;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use super::Backend;

/// A migration file: its name and its text.
type File = (&'static str, &'static str);

/// Both backends' migrations, of the same names: each backend's own SQL.
macro_rules! embed {
    ($($name:literal),* $(,)?) => {
        const SQLITE: &[File] = &[$(($name, include_str!(concat!("../../../migrations/sqlite/", $name)))),*];
        const POSTGRES: &[File] = &[$(($name, include_str!(concat!("../../../migrations/postgres/", $name)))),*];
    };
}

embed!(
    "0001_init.sql",
    "0002_history_cache.sql",
    "0003_job_generation.sql",
    "0004_tokens_and_lkg_versions.sql",
    "0005_build_repos.sql",
    "0006_build_identity_and_claims.sql",
    "0007_failed_results.sql",
    "0008_build_cells.sql",
    "0009_failure_keys.sql",
    "0010_build_verdicts.sql",
    "0011_results_retention.sql",
    "0012_known_failures.sql",
    "0013_build_suites.sql",
);

/// The migrator of `backend`'s schema.
pub(super) async fn migrator(backend: Backend) -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded(files(backend))).await
}

fn files(backend: Backend) -> &'static [File] {
    match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    }
}

#[derive(Debug)]
struct Embedded(&'static [File]);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move { self.0.iter().map(|(name, sql)| migration(name, sql)).collect() })
    }
}

/// `name` and `sql` as sqlx's directory source resolves a file: version before the first `_`, the
/// rest without `.sql` and with spaces for `_` as the description, no transaction when the text
/// starts with `-- no-transaction`.
fn migration(name: &str, sql: &'static str) -> Result<Migration, BoxDynError> {
    let (version, rest) = name.split_once('_').ok_or_else(|| format!("migration {name} has no <version>_ prefix"))?;
    let version: i64 = version.parse().map_err(|_| format!("migration {name} does not start with a number"))?;
    let kind = MigrationType::from_filename(rest);
    let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
    let no_tx = sql.starts_with("-- no-transaction");
    Ok(Migration::new(version, Cow::Owned(description), kind, SqlStr::from_static(sql), no_tx))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The embedded lists are the directories, resolved the same way: a new file in
    /// `migrations/<backend>/` that is not listed here fails this test.
    #[tokio::test]
    async fn embedded_migrations_are_the_directories_as_sqlx_resolves_them() {
        for (backend, dir) in [(Backend::Sqlite, "sqlite"), (Backend::Postgres, "postgres")] {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(dir);
            let from_dir = Migrator::new(dir.as_path()).await.unwrap();
            let embedded = migrator(backend).await.unwrap();
            let key = |m: &Migration| (m.version, m.description.to_string(), m.checksum.to_vec(), m.no_tx);
            let want: Vec<_> = from_dir.iter().map(key).collect();
            let got: Vec<_> = embedded.iter().map(key).collect();
            assert_eq!(got, want, "{}: list every file of the directory in migrations.rs", dir.display());
        }
    }

    #[test]
    fn a_file_without_a_version_is_an_error_naming_it() {
        let err = migration("init.sql", "select 1").unwrap_err().to_string();
        assert!(err.contains("init.sql"), "{err}");
    }
}
