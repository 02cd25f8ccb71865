//! What SIG Cloud Provider maintainers look at: the TestGrid configuration generated for the
//! providers' jobs and, later, the harness's own axum dashboard (HTML + JSON).
//!
//! This crate knows nothing of `harness`: it takes plain data (or traits) and the harness maps its
//! own configuration onto them.
//!
//! - [`grid`]: one job's tests × builds, with filters and "failing since", as HTML or JSON
//!   (work in progress toward the dashboard: pages, router and browser tests come next);
//! - [`testgrid`]: turns a list of providers and their jobs into the YAML TestGrid reads
//!   (`test_groups`, `dashboards`, `dashboard_groups`), validated and deterministic.

pub mod grid;
pub mod testgrid;
pub mod web;
