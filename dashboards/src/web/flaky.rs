//! The flakiest tests (`/flaky`): per test its flake and failure rate over the last builds of a
//! job (`?job=`), of every job of a provider (`?provider=`), or of every job. A rendered page is
//! kept until the index changes.

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::{Deserialize, Serialize};

use super::layout::{error_page, header_row, negotiate, not_found, wants_json};
use super::{DEFAULT_BUILDS, Dashboard};
use crate::grid::{Filter, Grid};
use crate::trends::{TestStats, percent, sort_flakiest, test_stats};

/// A page of flakiest tests: its query, the jobs it counts, and whether JSON.
pub type FlakyKey = (FlakyQuery, Vec<String>, bool);

/// The most tests the page lists.
const LISTED: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
pub struct FlakyQuery {
    job: Option<String>,
    provider: Option<String>,
    builds: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlakyPage {
    pub job: Option<String>,
    pub provider: Option<String>,
    /// Each job's latest builds counted.
    pub builds: usize,
    pub jobs: Vec<String>,
    /// Flakiest first (at most 200), only tests that failed or flaked.
    pub tests: Vec<TestStats>,
}

pub async fn page(State(dashboard): State<Dashboard>, Query(query): Query<FlakyQuery>, headers: HeaderMap) -> Response {
    let source = dashboard.source.as_ref();
    let builds = query.builds.unwrap_or(DEFAULT_BUILDS);
    if builds == 0 || builds > 1000 {
        return error_page(StatusCode::BAD_REQUEST, &format!("builds={builds}: use 1 to 1000"));
    }
    let all = match source.jobs().await {
        Ok(jobs) => jobs,
        Err(error) => return error.into_response(),
    };
    let jobs: Vec<String> = all
        .into_iter()
        .filter(|j| query.job.as_ref().is_none_or(|job| *job == j.job))
        .filter(|j| query.provider.is_none() || j.provider == query.provider)
        .map(|j| j.job)
        .collect();
    if jobs.is_empty() && (query.job.is_some() || query.provider.is_some()) {
        return not_found("no such job or provider: see the job list at /");
    }
    let generation = match source.index_generation().await {
        Ok(generation) => generation,
        Err(error) => return error.into_response(),
    };
    let key = (query.clone(), jobs.clone(), wants_json(&headers));
    if let Some(page) = dashboard.flaky.get(&key, generation) {
        return page;
    }
    let mut tests = Vec::new();
    for job in &jobs {
        match source.grid(job, builds).await {
            Ok(Some(data)) => tests.extend(test_stats(&Grid::new(job, data, &Filter::default()))),
            Ok(None) => {}
            Err(error) => return error.into_response(),
        }
    }
    sort_flakiest(&mut tests);
    tests.truncate(LISTED);
    let page = FlakyPage { job: query.job, provider: query.provider, builds, jobs, tests };
    let response = negotiate(&headers, &page, "Flakiest tests", render);
    dashboard.flaky.keep(key, generation, response).await
}

fn render(page: &FlakyPage) -> Markup {
    let of = match (&page.job, &page.provider) {
        (Some(job), _) => format!("job {job}"),
        (None, Some(provider)) => format!("provider {provider} ({} jobs)", page.jobs.len()),
        (None, None) => format!("every job ({})", page.jobs.len()),
    };
    html! {
        h1 { "Flakiest tests" }
        p {
            "Of " (of) ", over each job's last " (page.builds) " builds. A flake is a run that failed then passed on a retry, "
            "or a lone failure between two runs that did not fail; rates are over the runs (skipped builds are no runs)."
        }
        @if page.tests.is_empty() {
            p { "No test failed or flaked in these builds." }
        } @else {
            table.flaky {
                (header_row(&["test", "job", "flake rate", "failure rate", "runs"]))
                tbody {
                    @for test in &page.tests {
                        tr {
                            th scope="row" { (test.test) }
                            td { a href={ "/job/" (test.job) } { (test.job) } }
                            td { (percent(test.flake_rate)) " (" (test.flakes) ")" }
                            td { (percent(test.failure_rate)) " (" (test.failures) ")" }
                            td { (test.runs) }
                        }
                    }
                }
            }
        }
    }
}
