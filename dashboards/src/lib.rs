//! What SIG Cloud Provider maintainers look at: the TestGrid configuration generated for the
//! providers' jobs, and the harness's own axum dashboard (HTML + JSON).
//!
//! This crate knows nothing of `harness`: it takes plain data (or traits) and the harness maps its
//! own configuration onto them.
//!
//! - [`grid`]: one job's tests × builds, grouped, with filters, a summary and "failing since", as
//!   HTML or JSON;
//! - [`matrix`]: providers × Kubernetes minor versions, the home page's table;
//! - [`failures`]: failures clustered across providers by test and normalised message, each flagged
//!   likely Kubernetes-side or provider-side;
//! - [`trends`]: per test its flake and failure rate, per job its pass-rate and duration sparklines;
//! - [`web`]: the pages as an axum router (matrix, grids, builds, LKG, failure clusters, flakiest
//!   tests) over a data [`web::Source`];
//! - [`testgrid`]: turns a list of providers and their jobs into the YAML TestGrid reads
//!   (`test_groups`, `dashboards`, `dashboard_groups`), validated and deterministic.

pub mod failures;
pub mod grid;
pub mod matrix;
pub mod testgrid;
pub mod trends;
pub mod web;
