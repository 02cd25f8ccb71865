//! A job's grid: tests × builds, filtered by test-name regex and status, the tests skipped in every
//! shown build hidden unless `?skipped=show`, with the job's pass-rate and duration sparklines.
//! Rendered grids (HTML and JSON) are kept per query until the job's generation changes: a 1,000 ×
//! 200 grid takes milliseconds to read and render, checking the generation takes one indexed row.
//!
//! A test filter is a regex from an unauthenticated query string, so what it may cost is bounded:
//! its length, its nesting and its compiled size (the regex crate stops compiling past the limit,
//! and matches in time linear in the test name with a program that small). A refused filter is a
//! `400` carrying [`FilterRejected`], which the server counts.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use super::layout::{error_page, negotiate, not_found, percent_encode, wants_json};
use super::{DEFAULT_BUILDS, Dashboard};
use crate::grid::{self, Cell, Filter, Grid, Links};
use crate::trends::{JobTrend, Point, duration_sparkline, pass_rate_sparkline};

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
pub struct GridQuery {
    /// A regex on test names.
    test: Option<String>,
    /// Comma-separated cell states: fail,flaky,...
    status: Option<String>,
    builds: Option<usize>,
    /// `show`: also the tests skipped in every shown build.
    skipped: Option<String>,
}

/// The longest test filter taken, in bytes.
pub const MAX_FILTER_BYTES: usize = 256;
/// The most a compiled test filter may take (the regex crate's default is 10 MiB): room for any
/// filter of test names, and compiling stops early past it.
const FILTER_SIZE_LIMIT: usize = 256 * 1024;
/// The lazy DFA's cache for one filter.
const FILTER_DFA_LIMIT: usize = 1024 * 1024;
const FILTER_NEST_LIMIT: u32 = 32;

/// On a `400` for a test filter: why it was refused (`too_long`, `too_complex`, `invalid`), for the
/// server's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterRejected(pub &'static str);

/// A grid page: the job, its query, and whether JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GridKey {
    job: String,
    query: GridQuery,
    json: bool,
}

pub async fn grid_page(
    State(dashboard): State<Dashboard>,
    Path(job): Path<String>,
    Query(query): Query<GridQuery>,
    headers: HeaderMap,
) -> Response {
    let filter = match filter_of(&query) {
        Ok(filter) => filter,
        Err((message, rejected)) => {
            let mut response = error_page(StatusCode::BAD_REQUEST, &message);
            if let Some(rejected) = rejected {
                response.extensions_mut().insert(rejected);
            }
            return response;
        }
    };
    let generation = match dashboard.source.grid_generation(&job).await {
        Ok(Some(generation)) => generation,
        Ok(None) => return unknown_job(&job),
        Err(error) => return error.into_response(),
    };
    let key = GridKey { job: job.clone(), query: query.clone(), json: wants_json(&headers) };
    if let Some(rendered) = dashboard.grids.get(&key, generation) {
        return rendered;
    }
    let builds = query.builds.unwrap_or(DEFAULT_BUILDS).clamp(1, 1000);
    let response = match dashboard.source.grid(&job, builds).await {
        Ok(Some(data)) => {
            let grid = Grid::new(&job, data, &filter);
            let links = Links {
                toggle_skipped: toggle_skipped(&query),
                flakiest: format!("/flaky?job={}", percent_encode(&job, b"")),
            };
            negotiate(&headers, &grid, &job, |grid| {
                html! { h1 { (job) } (filter_form(&query)) (trend_of(grid)) (grid::render(grid, &links)) }
            })
        }
        Ok(None) => return unknown_job(&job),
        Err(error) => return error.into_response(),
    };
    dashboard.grids.keep(key, generation, response).await
}

fn unknown_job(job: &str) -> Response {
    not_found(&format!("no job {job:?}: see the job list at /"))
}

/// This page's address with the always-skipped tests toggled.
fn toggle_skipped(query: &GridQuery) -> String {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if let Some(test) = query.test.as_deref().filter(|t| !t.is_empty()) {
        pairs.push(("test", test.to_owned()));
    }
    if let Some(status) = query.status.as_deref().filter(|s| !s.is_empty()) {
        pairs.push(("status", status.to_owned()));
    }
    if let Some(builds) = query.builds {
        pairs.push(("builds", builds.to_string()));
    }
    if !shows_skipped(query) {
        pairs.push(("skipped", "show".to_owned()));
    }
    let encoded: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={}", percent_encode(v, b""))).collect();
    format!("?{}", encoded.join("&"))
}

fn shows_skipped(query: &GridQuery) -> bool {
    query.skipped.as_deref() == Some("show")
}

/// The grid's builds, oldest first, as the job's sparklines: each build's pass rate over the shown
/// tests, and its duration.
fn trend_of(grid: &Grid) -> Markup {
    let rates = grid.pass_rates();
    let points = grid
        .columns
        .iter()
        .zip(rates)
        .rev()
        .map(|(column, pass_rate)| Point {
            build: column.build.clone(),
            started_at: column.started_at,
            duration_seconds: column.finished_at.map(|f| f - column.started_at),
            passed: column.passed,
            pass_rate,
        })
        .collect();
    let trend = JobTrend { job: grid.job.clone(), points };
    html! { p.trend { "pass rate " (pass_rate_sparkline(&trend)) " duration " (duration_sparkline(&trend)) } }
}

/// The query as a filter; `Err` is the message, and for a refused test filter why.
fn filter_of(query: &GridQuery) -> Result<Filter, (String, Option<FilterRejected>)> {
    let test = match query.test.as_deref().filter(|t| !t.is_empty()) {
        Some(pattern) => Some(test_filter(pattern).map_err(|(message, why)| (message, Some(why)))?),
        None => None,
    };
    let mut statuses = Vec::new();
    for name in query.status.iter().flat_map(|s| s.split(',')).filter(|s| !s.is_empty()) {
        let cell = Cell::ALL
            .into_iter()
            .find(|cell| cell.as_str() == name)
            .ok_or_else(|| (format!("unknown status {name:?}: use pass, fail, flaky, skip, running or none"), None))?;
        statuses.push(cell);
    }
    Ok(Filter { test, statuses, show_skipped: shows_skipped(query) })
}

/// A test filter compiled within its bounds.
fn test_filter(pattern: &str) -> Result<Regex, (String, FilterRejected)> {
    if pattern.len() > MAX_FILTER_BYTES {
        let message = format!("the test filter is {} bytes long: at most {MAX_FILTER_BYTES}", pattern.len());
        return Err((message, FilterRejected("too_long")));
    }
    let compiled = RegexBuilder::new(pattern)
        .size_limit(FILTER_SIZE_LIMIT)
        .dfa_size_limit(FILTER_DFA_LIMIT)
        .nest_limit(FILTER_NEST_LIMIT)
        .build();
    match compiled {
        Ok(regex) => Ok(regex),
        Err(regex::Error::CompiledTooBig(_)) => Err((
            format!("the test filter {pattern:?} is too complex (a large repetition?): use a simpler regex"),
            FilterRejected("too_complex"),
        )),
        Err(e) => Err((format!("test filter {pattern:?} is not a regex: {e}"), FilterRejected("invalid"))),
    }
}

fn filter_form(query: &GridQuery) -> Markup {
    html! {
        form.filter method="get" role="search" {
            label { "test " input type="search" name="test" value=(query.test.as_deref().unwrap_or("")) placeholder="regex"; }
            label { " status " input type="text" name="status" value=(query.status.as_deref().unwrap_or("")) placeholder="fail,flaky"; }
            @if let Some(builds) = query.builds { input type="hidden" name="builds" value=(builds); }
            @if shows_skipped(query) { input type="hidden" name="skipped" value="show"; }
            button type="submit" { "filter" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    /// Refused by the compiled-size limit (`too_complex`), before any costly compilation; how fast
    /// that is is a figure of docs/benchmarks.md, not a timed assertion.
    fn costly_test_filters_are_refused_by_their_limits_and_say_why() {
        let deep = "(".repeat(40);
        for (pattern, why) in [
            (r"\w{1000}", "too_complex"),
            (r"(\w{50}){50}", "too_complex"),
            (r"\p{L}{500}[\w\d]{500}", "too_complex"),
            ("(", "invalid"),
            (deep.as_str(), "invalid"),
        ] {
            let (message, rejected) = test_filter(pattern).unwrap_err();
            assert_eq!(rejected, FilterRejected(why), "{pattern}: {message}");
        }
        let (message, rejected) = test_filter(&"a".repeat(MAX_FILTER_BYTES + 1)).unwrap_err();
        assert_eq!(rejected, FilterRejected("too_long"), "{message}");
        for fine in ["^ga", r"\[sig-cloud-provider\] .*LoadBalancer", r"\w+ \d{1,3}", "(?i)node|route"] {
            test_filter(fine).unwrap_or_else(|e| panic!("{fine}: {e:?}"));
        }
    }
}
