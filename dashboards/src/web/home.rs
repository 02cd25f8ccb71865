//! The home page: the current LKG version set, the provider × Kubernetes minor matrix (each cell
//! with its latest job's pass-rate sparkline), a link to each suite's tests by provider, and the
//! jobs with their pass-rate and duration
//! sparklines.

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::{Deserialize, Serialize};

use super::layout::{header_row, negotiate, percent_encode, revision_link, short};
use super::{JobSummary, Source};
use crate::matrix::{Matrix, MatrixCell};
use crate::trends::{JobTrend, duration_sparkline, pass_rate_sparkline};

/// How many of each job's latest builds its sparklines show.
const TREND_BUILDS: usize = 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Home {
    /// The newest Kubernetes commit good with every provider, and each provider's commit there;
    /// `null` while there is none (or no LKG is loaded).
    pub version_set: Option<lkg::VersionSet>,
    /// The server has just started and is still loading the LKG.
    #[serde(default)]
    pub lkg_loading: bool,
    /// While there is no version set: the providers with no good run yet (what keeps it away).
    #[serde(default)]
    pub without_good_run: Vec<String>,
    pub matrix: Matrix,
    /// The suites with results, each a table of its tests by provider (`/suite/{suite}`).
    #[serde(default)]
    pub suites: Vec<String>,
    pub jobs: Vec<JobSummary>,
    /// Each job's latest finished builds, oldest first.
    pub trends: Vec<JobTrend>,
}

pub async fn page(State(source): State<Arc<dyn Source>>, headers: HeaderMap) -> Response {
    let read = (source.matrix().await, source.suites().await, source.jobs().await, source.trends(TREND_BUILDS).await);
    let (builds, suites, jobs, trends) = match read {
        (Ok(builds), Ok(suites), Ok(jobs), Ok(trends)) => (builds, suites, jobs, trends),
        (Err(error), ..) | (_, Err(error), ..) | (.., Err(error), _) | (.., Err(error)) => {
            return error.into_response();
        }
    };
    let snapshot = source.lkg();
    let engine = snapshot.as_ref().and_then(|s| s.default_engine());
    let version_set = engine.and_then(|engine| engine.version_set());
    let without_good_run = match (&version_set, engine) {
        (None, Some(engine)) => {
            engine.providers().filter(|provider| matches!(engine.lkg(provider), Ok(None))).map(str::to_owned).collect()
        }
        _ => Vec::new(),
    };
    let lkg_loading = snapshot.is_none();
    let home = Home { version_set, lkg_loading, without_good_run, matrix: Matrix::new(builds), suites, jobs, trends };
    negotiate(&headers, &home, "Matrix", |home| render(home, source.as_ref()))
}

fn render(home: &Home, source: &dyn Source) -> Markup {
    html! {
        h1 { "Providers × Kubernetes" }
        section.versionset aria-label="last known good version set" {
            @match &home.version_set {
                Some(set) => {
                    strong { "Last known good version set: " }
                    "Kubernetes " (revision_link(source.repo("kubernetes").as_deref(), &set.kubernetes_commit))
                    @for (provider, pair) in &set.providers {
                        " · " (provider) " " (revision_link(source.repo(provider).as_deref(), &pair.provider_commit))
                    }
                    " " a href="/lkg" { "details" }
                }
                None if home.lkg_loading => { strong { "Last known good version set: " } "still loading (the server has just started)." }
                None => { strong { "No version set yet: " } (no_version_set(&home.without_good_run)) " " a href="/lkg" { "details" } }
            }
        }
        @if home.matrix.rows.is_empty() {
            p { "No finished build names its provider and Kubernetes version yet." }
        } @else {
            table.matrix {
                thead { tr { th scope="col" { "provider" } @for minor in &home.matrix.minors { th scope="col" { (minor) } } } }
                tbody {
                    @for row in &home.matrix.rows {
                        tr {
                            th scope="row" {
                                (row.provider) br;
                                small { a href={ "/flaky?provider=" (percent_encode(&row.provider, b"")) } { "flakiest tests" } }
                            }
                            @for (cell, minor) in row.cells.iter().zip(&home.matrix.minors) {
                                (matrix_cell(&row.provider, minor, cell.as_ref(), trend(home, cell.as_ref().map(|c| c.latest.job.as_str()))))
                            }
                        }
                    }
                }
            }
        }
        @if !home.suites.is_empty() {
            p.suites {
                "Each test by provider and Kubernetes minor: "
                @for (i, suite) in home.suites.iter().enumerate() {
                    @if i > 0 { " · " }
                    a href={ "/suite/" (percent_encode(suite, b"")) } { (suite) }
                }
            }
        }
        p { a href="/clusters" { "Failure clusters across providers" } " · " a href="/flaky" { "flakiest tests of every job" } }
        h2 { "Jobs" }
        table.jobs {
            (header_row(&["job", "provider", "test pass rate", "duration"]))
            tbody {
                @for job in &home.jobs {
                    tr {
                        th scope="row" { a href={ "/job/" (job.job) } { (job.job) } }
                        td { (job.provider.as_deref().unwrap_or("")) }
                        @match trend(home, Some(&job.job)) {
                            Some(trend) => { td { (pass_rate_sparkline(trend)) } td { (duration_sparkline(trend)) } }
                            None => { td { "no finished build" } td { "–" } }
                        }
                    }
                }
            }
        }
    }
}

/// Why there is no version set, and what to run about it.
fn no_version_set(without_good_run: &[String]) -> Markup {
    match without_good_run {
        [] => html! { "every provider has a good run, but no Kubernetes commit is good with all of them." },
        [provider] => html! {
            "no good run of provider " strong { (provider) } " yet; run it with "
            code { "harness run --provider " (provider) } "."
        },
        providers => html! {
            "no good run yet of the providers " strong { (providers.join(", ")) } "; run one with "
            code { "harness run --provider NAME" } ", or all of them with " code { "harness matrix" } "."
        },
    }
}

fn trend<'a>(home: &'a Home, job: Option<&str>) -> Option<&'a JobTrend> {
    home.trends.iter().find(|t| Some(t.job.as_str()) == job)
}

fn matrix_cell(provider: &str, minor: &str, cell: Option<&MatrixCell>, trend: Option<&JobTrend>) -> Markup {
    let Some(cell) = cell else {
        return html! { td.none aria-label={ (provider) " on " (minor) ": never run" } { "–" } };
    };
    let latest = &cell.latest;
    let outcome = match latest.passed {
        Some(true) => "pass",
        _ => "fail",
    };
    let rate = (cell.pass_rate() * 100.0).round();
    let label = format!(
        "{provider} on {minor}: latest build {} {outcome} (Kubernetes {}, provider {}), {rate}% of {} builds passed",
        latest.build,
        latest.kubernetes_version,
        short(latest.provider_version.as_deref().unwrap_or("?")),
        cell.builds
    );
    // Which CCM release ran against which Kubernetes: a CCM older than its control plane is a
    // version-skew cell, named as such.
    let skew = match cell.version_skew() {
        Some(0) | None => String::new(),
        Some(behind) if behind > 0 => format!(" (skew: {behind} minor behind)"),
        Some(ahead) => format!(" (skew: {} minor ahead)", -ahead),
    };
    html! {
        td class=(outcome) title=(label) aria-label=(label) {
            a href={ "/job/" (latest.job) "/build/" (latest.build) } { (outcome) }
            br; small.versions {
                "CCM " (short(latest.provider_version.as_deref().unwrap_or("?"))) " on " (latest.kubernetes_version) (skew)
            }
            br; small { (rate) "% of " (cell.builds) }
            @if let Some(trend) = trend { br; (pass_rate_sparkline(trend)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::no_version_set;

    #[test]
    fn no_version_set_names_the_providers_without_a_good_run_and_the_command_that_runs_them() {
        let one = no_version_set(&["aws".to_owned()]).into_string();
        assert!(one.contains("no good run of provider <strong>aws</strong> yet"), "{one}");
        assert!(one.contains("<code>harness run --provider aws</code>"), "{one}");
        let two = no_version_set(&["aws".to_owned(), "vsphere".to_owned()]).into_string();
        assert!(two.contains("<strong>aws, vsphere</strong>") && two.contains("<code>harness matrix</code>"), "{two}");
        let none = no_version_set(&[]).into_string();
        assert!(none.contains("every provider has a good run") && !none.contains("harness run"), "{none}");
    }
}
