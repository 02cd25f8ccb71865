//! The failure clusters of the last days across every provider (`/clusters`), and one cluster
//! (`/clusters/{id}`): which providers, Kubernetes versions and jobs hit it, since when, which side
//! it likely is on, and the builds. See [`failures`]. A rendered page is kept until the
//! index changes, and at most [`KEPT`]: the window moves with the time.

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::{Deserialize, Serialize};

use super::layout::{error_page, header_row, negotiate, not_found, short, time, wants_json};
use super::{Dashboard, Source};
use failures::{self, Cluster, Hit, Side};

/// How long a rendered page is kept while the index does not change: its window of days then starts
/// at most this much too early.
pub const KEPT: Duration = Duration::from_secs(60);

/// A page of clusters: one cluster's id (or the list), the window, and whether JSON.
pub type ClustersKey = (Option<String>, Option<u32>, bool);

/// The window unless `?days=` says otherwise, and the longest one taken.
pub const DEFAULT_DAYS: u32 = 14;
const MAX_DAYS: u32 = 3650;

#[derive(Debug, Deserialize)]
pub struct DaysQuery {
    days: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClustersPage {
    pub days: u32,
    /// Failures of builds started at or after this (epoch seconds).
    pub since: i64,
    /// Each with its newest and oldest failure only.
    pub clusters: Vec<Cluster>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterPage {
    pub days: u32,
    pub since: i64,
    #[serde(flatten)]
    pub cluster: Cluster,
}

/// The window's start and its clusters, or the page saying why not.
async fn read(source: &dyn Source, days: Option<u32>) -> Result<(u32, i64, Vec<Cluster>), Response> {
    let days = days.unwrap_or(DEFAULT_DAYS);
    if days == 0 || days > MAX_DAYS {
        return Err(error_page(StatusCode::BAD_REQUEST, &format!("days={days}: use 1 to {MAX_DAYS}")));
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let since = now - i64::from(days) * 86_400;
    let failures = source.failures(since).await.map_err(IntoResponse::into_response)?;
    Ok((days, since, failures::clusters(failures)))
}

/// The index's generation, and the page kept for `key` at it if there is one.
async fn kept(dashboard: &Dashboard, key: &ClustersKey) -> Result<i64, Response> {
    let generation = dashboard.source.index_generation().await.map_err(IntoResponse::into_response)?;
    match dashboard.clusters.get(key, generation) {
        Some(page) => Err(page),
        None => Ok(generation),
    }
}

pub async fn list(State(dashboard): State<Dashboard>, Query(query): Query<DaysQuery>, headers: HeaderMap) -> Response {
    let key = (None, query.days, wants_json(&headers));
    let generation = match kept(&dashboard, &key).await {
        Ok(generation) => generation,
        Err(page) => return page,
    };
    let (days, since, clusters) = match read(dashboard.source.as_ref(), query.days).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    let clusters = clusters.into_iter().map(Cluster::summary).collect();
    let page = ClustersPage { days, since, clusters };
    let response = negotiate(&headers, &page, "Failure clusters", render_list);
    dashboard.clusters.keep(key, generation, response).await
}

pub async fn one(
    State(dashboard): State<Dashboard>,
    Path(id): Path<String>,
    Query(query): Query<DaysQuery>,
    headers: HeaderMap,
) -> Response {
    let key = (Some(id.clone()), query.days, wants_json(&headers));
    let generation = match kept(&dashboard, &key).await {
        Ok(generation) => generation,
        Err(page) => return page,
    };
    let response = one_page(dashboard.source.as_ref(), id, query.days, &headers).await;
    dashboard.clusters.keep(key, generation, response).await
}

async fn one_page(source: &dyn Source, id: String, days: Option<u32>, headers: &HeaderMap) -> Response {
    let (days, since, clusters) = match read(source, days).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    let Some(cluster) = clusters.into_iter().find(|c| c.id == id) else {
        return not_found(&format!(
            "no failure cluster {id:?} in the last {days} days: see /clusters?days={days}, or a longer window"
        ));
    };
    let page = ClusterPage { days, since, cluster };
    negotiate(headers, &page, &format!("Failure cluster {id}"), render_one)
}

fn side_badge(side: Side) -> Markup {
    html! { strong class={ "side " (side.class()) } { (side.as_str()) } }
}

fn versions(hit: &Hit) -> Markup {
    html! {
        "Kubernetes " code { (hit.kubernetes_version.as_deref().unwrap_or("?")) }
        " · " (hit.provider) " " code title=(hit.provider_version.as_deref().unwrap_or("?")) { (short(hit.provider_version.as_deref().unwrap_or("?"))) }
    }
}

fn build_link(hit: &Hit) -> Markup {
    html! { a href={ "/job/" (hit.job) "/build/" (hit.build) } { (hit.job) " " (hit.build) } }
}

/// The message's first line, for a list.
fn first_line(message: &str) -> &str {
    if message.is_empty() { "(no message)" } else { message.lines().next().unwrap_or(message) }
}

fn window_nav(days: u32, base: &str) -> Markup {
    html! {
        nav.window aria-label="time window" {
            "Failures of the last: "
            @for choice in [1, 7, 14, 30, 90] {
                @if choice == days { strong aria-current="page" { (choice) " days" } " " }
                @else { a href={ (base) "?days=" (choice) } { (choice) " days" } " " }
            }
        }
    }
}

fn render_list(page: &ClustersPage) -> Markup {
    let across = page.clusters.iter().filter(|c| c.side == Side::Kubernetes).count();
    html! {
        h1 { "Failure clusters" }
        p {
            "Failures grouped by test and by their message with numbers, IDs, durations, pod names and addresses masked. "
            "A cluster seen by two or more providers on the same Kubernetes version is "
            span.side.kubernetes-side { "likely Kubernetes-side" } "; one seen by a single provider, "
            span.side.provider-side { "likely provider-side" } "."
        }
        (window_nav(page.days, "/clusters"))
        p.count { (page.clusters.len()) " clusters since " (time(page.since)) ", " (across) " likely Kubernetes-side" }
        @if page.clusters.is_empty() {
            p { "No failures in this window." }
        } @else {
            table.clusters {
                (header_row(&["cluster", "side", "providers", "Kubernetes", "failures", "first seen"]))
                tbody {
                    @for cluster in &page.clusters {
                        tr {
                            th scope="row" {
                                a href={ "/clusters/" (cluster.id) "?days=" (page.days) } { (cluster.test) }
                                br; code.message { (first_line(&cluster.message)) }
                            }
                            td { (side_badge(cluster.side)) }
                            td { (cluster.providers.join(", ")) }
                            td { (cluster.kubernetes_versions.join(", ")) }
                            td { (cluster.failures) }
                            td { (time(cluster.first_seen().started_at)) br; small { (versions(cluster.first_seen())) } }
                        }
                    }
                }
            }
        }
    }
}

fn render_one(page: &ClusterPage) -> Markup {
    let cluster = &page.cluster;
    let first = cluster.first_seen();
    html! {
        h1 { "Failure cluster " code { (cluster.id) } }
        p.verdict {
            (side_badge(cluster.side)) ": "
            @match cluster.side {
                Side::Kubernetes => { "seen by " (cluster.providers.join(", ")) " on the same Kubernetes version." }
                Side::Provider => { "seen by " (cluster.providers.join(", ")) " only." }
                Side::Unclear => { "seen by " (cluster.providers.join(", ")) ", but never two of them on the same Kubernetes version." }
            }
        }
        dl.meta {
            dt { "test" } dd { (cluster.test) }
            dt { "message (normalised)" } dd { pre.message { (if cluster.message.is_empty() { "(no message)" } else { cluster.message.as_str() }) } }
            dt { "providers" } dd { (cluster.providers.join(", ")) }
            dt { "Kubernetes versions" } dd { (cluster.kubernetes_versions.join(", ")) }
            dt { "jobs" } dd { @for job in &cluster.jobs { a href={ "/job/" (job) } { (job) } " " } }
            dt { "first seen" } dd { (time(first.started_at)) " in " (build_link(first)) ": " (versions(first)) }
            dt { "last seen" } dd { (time(cluster.last_seen().started_at)) " in " (build_link(cluster.last_seen())) ": " (versions(cluster.last_seen())) }
            dt { "failures" } dd { (cluster.failures) " in the last " (page.days) " days" }
        }
        h2 { "Builds" }
        table.clusters {
            (header_row(&["build", "provider", "Kubernetes", "provider version", "started", "message"]))
            tbody {
                @for hit in &cluster.hits {
                    tr {
                        th scope="row" { (build_link(hit)) }
                        td { (hit.provider) }
                        td { (hit.kubernetes_version.as_deref().unwrap_or("?")) }
                        td { code title=(hit.provider_version.as_deref().unwrap_or("?")) { (short(hit.provider_version.as_deref().unwrap_or("?"))) } }
                        td { (time(hit.started_at)) }
                        td { details { summary { (first_line(hit.message.as_deref().unwrap_or(""))) } pre { (hit.message.as_deref().unwrap_or("(no message)")) } } }
                    }
                }
            }
        }
        p { a href={ "/clusters?days=" (page.days) } { "all clusters" } }
    }
}
