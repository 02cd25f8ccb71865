//! cloud-provider-harness: builds a CCM, brings up a cluster, runs the suites, tears down and
//! publishes results in the Prow layout. The `harness` binary is a thin CLI over this library.

pub mod bisect;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod dashboard;
pub mod deploy;
pub mod lkg;
pub mod progress;
pub mod results;
pub mod run;
pub mod serve;
pub mod signals;
pub mod suites;
pub mod testing;
pub mod tokens;
pub mod toolchain;
