//! One suite's tests × providers and Kubernetes minors (`/suite/{suite}`), from each provider and
//! minor's newest build of it: which tests each provider passes, skips (with the reason, such as a
//! capability it does not declare) or fails. A rendered page is kept until the index changes.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::Dashboard;
use super::layout::{negotiate, not_found, percent_encode, short, wants_json};
use crate::suite_table::{SuiteCell, SuiteColumn, SuiteTable};

/// A rendered table: its suite, whether it shows the reasonless skips, and whether JSON.
pub type SuiteKey = (String, bool, bool);

#[derive(Debug, Clone, Default, Deserialize)]
pub struct SuiteQuery {
    /// `show`: keep the tests every column skipped without a reason.
    skipped: Option<String>,
}

pub async fn page(
    State(dashboard): State<Dashboard>,
    Path(suite): Path<String>,
    Query(query): Query<SuiteQuery>,
    headers: HeaderMap,
) -> Response {
    let source = dashboard.source.as_ref();
    let show_skipped = query.skipped.as_deref() == Some("show");
    let generation = match source.index_generation().await {
        Ok(generation) => generation,
        Err(error) => return error.into_response(),
    };
    let key = (suite.clone(), show_skipped, wants_json(&headers));
    if let Some(page) = dashboard.suites.get(&key, generation) {
        return page;
    }
    let builds = match source.suite(&suite).await {
        Ok(builds) => builds,
        Err(error) => return error.into_response(),
    };
    if builds.is_empty() {
        return not_found(&format!(
            "no finished build of a provider has results of the suite {suite:?}: see the suites listed at /"
        ));
    }
    let table = SuiteTable::new(&suite, builds, show_skipped);
    let response = negotiate(&headers, &table, &format!("{suite} by provider"), |table| render(table, show_skipped));
    dashboard.suites.keep(key, generation, response).await
}

fn render(table: &SuiteTable, show_skipped: bool) -> Markup {
    html! {
        h1 { (table.suite) " by provider and Kubernetes minor" }
        p {
            "Each test's result in the newest build of each provider and Kubernetes minor. A skip gives its reason "
            "(a capability the provider does not declare, with its " code { "unsupported:" } " reason); "
            "a failure its message. Numbers refer to the notes below the table."
        }
        p.count {
            (table.rows.len()) " tests"
            @if table.hidden > 0 {
                "; " (table.hidden) " skipped without a reason in every column are hidden ("
                a href="?skipped=show" { "show them" } ")"
            } @else if show_skipped {
                " (" a href="?" { "hide those skipped without a reason everywhere" } ")"
            }
        }
        div.gridwrap {
            table.suite {
                thead {
                    tr {
                        th.test scope="col" { "test" }
                        @for column in &table.columns { (column_header(column)) }
                    }
                }
                tbody {
                    @for row in &table.rows {
                        tr {
                            th.test scope="row" { (row.test) }
                            @for cell in &row.cells { (suite_cell(cell.as_ref())) }
                        }
                    }
                }
            }
        }
        @if !table.notes.is_empty() {
            h2 { "Notes" }
            ol.notes {
                @for (number, note) in table.notes.iter().enumerate() {
                    li id={ "note-" (number + 1) } { code.message { (note) } }
                }
            }
        }
    }
}

fn column_header(column: &SuiteColumn) -> Markup {
    let build = &column.build;
    let counts: Vec<String> = column.counts.iter().map(|(cell, count)| format!("{count} {}", cell.as_str())).collect();
    html! {
        th scope="col" title={ "provider " (build.provider) " " (build.provider_version.as_deref().unwrap_or("?")) " on Kubernetes " (build.kubernetes_version) } {
            a href={ "/job/" (percent_encode(&build.job, b"")) "/build/" (percent_encode(&build.build, b"")) } {
                (build.provider) br; (column.minor)
            }
            br; small.versions { "CCM " (short(build.provider_version.as_deref().unwrap_or("?"))) " on " (build.kubernetes_version) }
            br; small { (counts.join(", ")) }
        }
    }
}

fn suite_cell(cell: Option<&SuiteCell>) -> Markup {
    match cell {
        None => html! { td.none { "–" } },
        Some(SuiteCell { cell, note }) => html! {
            td class=(cell.as_str()) {
                (cell.as_str())
                @if let Some(note) = note { " " a href={ "#note-" (note) } aria-label={ "note " (note) } { sup { (note) } } }
            }
        },
    }
}
