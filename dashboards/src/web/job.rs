//! A job's grid: tests × builds, filtered by test-name regex and status.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use regex::Regex;
use serde::Deserialize;

use super::layout::{error_page, negotiate, not_found, unavailable};
use super::{DEFAULT_BUILDS, Source};
use crate::grid::{self, Cell, Filter, Grid};

#[derive(Debug, Deserialize)]
pub struct GridQuery {
    /// A regex on test names.
    test: Option<String>,
    /// Comma-separated cell states: fail,flaky,...
    status: Option<String>,
    builds: Option<usize>,
}

pub async fn grid_page(
    State(source): State<Arc<dyn Source>>,
    Path(job): Path<String>,
    Query(query): Query<GridQuery>,
    headers: HeaderMap,
) -> Response {
    let filter = match filter_of(&query) {
        Ok(filter) => filter,
        Err(message) => return error_page(StatusCode::BAD_REQUEST, &message),
    };
    match source.grid(&job, query.builds.unwrap_or(DEFAULT_BUILDS).clamp(1, 1000)).await {
        Ok(Some((columns, results))) => {
            let grid = Grid::new(&job, columns, results, &filter);
            negotiate(&headers, &grid, &job, |grid| html! { h1 { (job) } (filter_form(&query)) (grid::render(grid)) })
        }
        Ok(None) => not_found(&format!("no job {job:?}: see the job list at /")),
        Err(error) => unavailable(&error),
    }
}

fn filter_of(query: &GridQuery) -> Result<Filter, String> {
    let test = match query.test.as_deref().filter(|t| !t.is_empty()) {
        Some(pattern) => Some(Regex::new(pattern).map_err(|e| format!("test filter {pattern:?} is not a regex: {e}"))?),
        None => None,
    };
    let mut statuses = Vec::new();
    for name in query.status.iter().flat_map(|s| s.split(',')).filter(|s| !s.is_empty()) {
        let cell = Cell::ALL
            .into_iter()
            .find(|cell| cell.as_str() == name)
            .ok_or_else(|| format!("unknown status {name:?}: use pass, fail, flaky, skip, running or none"))?;
        statuses.push(cell);
    }
    Ok(Filter { test, statuses })
}

fn filter_form(query: &GridQuery) -> Markup {
    html! {
        form.filter method="get" role="search" {
            label { "test " input type="search" name="test" value=(query.test.as_deref().unwrap_or("")) placeholder="regex"; }
            label { " status " input type="text" name="status" value=(query.status.as_deref().unwrap_or("")) placeholder="fail,flaky"; }
            @if let Some(builds) = query.builds { input type="hidden" name="builds" value=(builds); }
            button type="submit" { "filter" }
        }
    }
}
