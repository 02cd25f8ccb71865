//! Full tier: needs root, real clusters, PostgreSQL, Chromium and tools built with Go.
//!
//! The `harness` binary's commands end to end (`run`, `bisect`, `publish`, `serve` ingestion, the
//! `aws` provider, signals), in one test binary: each file is a module, so a change in a crate below
//! relinks one binary, not one per file. Select a file's tests by its module path, e.g.
//! `cargo test -p harness --test commands -- run::`.

mod aws;
mod bisect;
mod cli;
mod cli_results;
mod deploy;
mod image;
mod ingest;
mod openstack;
mod provider_run;
mod prow;
mod real_prow;
mod run;
mod upgrade;
mod upstream_load_balancers;
mod vsphere;
