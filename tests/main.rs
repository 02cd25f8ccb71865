//! Full tier: needs root, real clusters, PostgreSQL, storage emulators and tools built with Go.
//!
//! The end-to-end tests across the crates, in one test binary: each file is a module, so a change
//! in a crate below relinks one binary, not one per file. Select a file's tests by its module path,
//! e.g. `cargo test -p e2e -- real_nodes::`.

mod clusters;
mod common;
mod deploy_manifests;
mod openstack_cloud;
mod prow_config;
mod publishing;
mod real_images;
mod real_nodes;
mod reference_ccm;
mod results_s3;
mod submission_checks;
mod suites;
mod testgrid_fixture;
mod testgrid_parity;
