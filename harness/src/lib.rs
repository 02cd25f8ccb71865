//! cloud-provider-harness's orchestration: a run's lifecycle ([`run`]: Build, Up, Deploy, Test,
//! DumpClusterLogs, Down, publish), the deployers that bring a cluster up ([`deploy`]), the suites
//! ([`suites`]: cloud-e2e, upstream conformance under ginkgo, exec) and bisection ([`bisect`]).
//! The `harness` binary's command line (`src/cli/`) is a module of the binary, over this library
//! and the crates below it (`docs/design.md`).

pub mod bisect;
pub mod deploy;
pub mod run;
pub mod suites;
pub mod upgrade;

/// The commit this harness was built from (`build.rs`), when it was built in a git checkout.
pub fn built_from_commit() -> Option<&'static str> {
    Some(env!("HARNESS_GIT_COMMIT")).filter(|commit| *commit != "unknown")
}

/// The tag of this harness's image: its version and the first 12 digits of its commit
/// (`v0.1.0-0123456789ab`), or the version alone outside a git checkout.
pub fn image_tag() -> String {
    let version = concat!("v", env!("CARGO_PKG_VERSION"));
    match built_from_commit() {
        Some(commit) => format!("{version}-{}", &commit[..commit.len().min(12)]),
        None => version.to_owned(),
    }
}
