//! The CI matrix: one Prow periodic job per provider × Kubernetes release line × job of the
//! provider (one job running every suite, unless the provider splits its suites into `jobs`), and
//! the TestGrid input that shows them.
//!
//! A provider with a `certification:` block has one more job per release line,
//! [`crate::CERTIFICATION_JOB`], running `certified-conformance` alone.
//!
//! Job names are `ci-cloud-provider-<provider>[-<job>]-k8s-<major>.<minor>`:
//! - `ci-` because they are periodics (k8s test-infra's `ci-`/`pull-` prefixes), and
//!   `cloud-provider-<provider>` as SIG Cloud Provider's own jobs are named;
//! - the release line, not the patch version: bumping `v1.37.1` to `v1.37.2` in the file keeps the
//!   job, hence its TestGrid history and its GCS prefix; the exact version of each build is in its
//!   `finished.json` metadata (`kubernetes-version`), shown as a TestGrid header row. So a provider
//!   lists one version per release line;
//! - the dot is kept (`1.37`, as Kubernetes writes release lines and branches): Prow job names and
//!   label values, GCS paths and TestGrid names all accept it.
//!
//! Names are checked to be at most 63 characters (a Kubernetes label value: Prow labels pods with
//! the job name) and unique even once TestGrid normalises them to letters and digits.

use std::time::Duration;

use crate::testgrid::{Job, Provider as TestGridProvider, TestGridInput};

use super::{JobSpec, KubernetesVersion, Provider, ProvidersConfig};

pub const JOB_PREFIX: &str = "ci-cloud-provider-";
/// The longest job name: a Kubernetes label value.
pub const MAX_JOB_NAME: usize = 63;

/// The job of `provider`'s job `job` (`None`: its single default job) on `version`'s release line.
pub fn job_name(provider: &str, job: Option<&str>, version: &KubernetesVersion) -> String {
    let line = version.minor_line();
    match job {
        None => format!("{JOB_PREFIX}{provider}-k8s-{line}"),
        Some(job) => format!("{JOB_PREFIX}{provider}-{job}-k8s-{line}"),
    }
}

/// The TestGrid dashboard of a provider's certification jobs: `conformance-<its dashboard>`, as
/// upstream's `conformance-*` dashboards show conformance runs only.
pub fn conformance_dashboard(dashboard: &str) -> String {
    format!("conformance-{dashboard}")
}

/// Where Prow uploads a job's builds: `<bucket>/logs/<job>` (the Prow/GCS layout).
pub fn gcs_prefix(bucket: &str, job: &str) -> String {
    format!("{bucket}/logs/{job}")
}

/// One cell of the matrix: a CI job.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell<'a> {
    pub provider: &'a Provider,
    pub kubernetes: &'a KubernetesVersion,
    pub job: &'a JobSpec,
    /// [`job_name`].
    pub name: String,
}

impl Cell<'_> {
    /// The suites the job runs.
    pub fn suites(&self) -> &[String] {
        &self.job.suites
    }

    /// How often it runs (Prow `interval`; [`super::validate::format_duration`] writes it Go's way).
    pub fn interval(&self) -> Duration {
        self.job.interval
    }

    /// The TestGrid dashboard its tab is on: its provider's, or for the certification job
    /// [`conformance_dashboard`].
    pub fn testgrid_dashboard(&self) -> String {
        let dashboard = &self.provider.testgrid.dashboard;
        if self.job.certification { conformance_dashboard(dashboard) } else { dashboard.clone() }
    }

    pub fn gcs_prefix(&self, config: &ProvidersConfig) -> String {
        gcs_prefix(&config.testgrid.gcs_bucket, &self.name)
    }
}

/// Every cell, in file order: providers, then their Kubernetes versions, then their jobs.
pub fn cells(config: &ProvidersConfig) -> Vec<Cell<'_>> {
    config.providers.iter().flat_map(provider_cells).collect()
}

fn provider_cells(provider: &Provider) -> impl Iterator<Item = Cell<'_>> {
    provider.kubernetes.iter().flat_map(move |kubernetes| {
        provider.jobs.iter().map(move |job| Cell {
            provider,
            kubernetes,
            job,
            name: job_name(&provider.name, job.name.as_deref(), kubernetes),
        })
    })
}

impl ProvidersConfig {
    /// [`cells`].
    pub fn cells(&self) -> Vec<Cell<'_>> {
        cells(self)
    }

    /// The cell of a job, by name (what a Prow job passes as `$JOB_NAME`).
    pub fn cell(&self, job: &str) -> Option<Cell<'_>> {
        self.cells().into_iter().find(|cell| cell.name == job)
    }
}

/// The TestGrid generator's input: a test group and a tab per job, on its provider's dashboard.
pub fn testgrid_input(config: &ProvidersConfig) -> TestGridInput {
    let providers = config
        .providers
        .iter()
        .map(|provider| TestGridProvider {
            name: provider.name.clone(),
            dashboard: provider.testgrid.dashboard.clone(),
            num_failures_to_alert: provider.testgrid.num_failures_to_alert,
            jobs: provider_cells(provider)
                .map(|cell| Job {
                    gcs_prefix: gcs_prefix(&config.testgrid.gcs_bucket, &cell.name),
                    dashboard: Some(cell.testgrid_dashboard()),
                    name: cell.name,
                })
                .collect(),
        })
        .collect();
    TestGridInput { dashboard_group: config.testgrid.dashboard_group.clone(), providers }
}
