//! The LKG page: the version set, then per provider its LKG, its culprit ranges with commit links,
//! and an SVG plot of every tested pair's verdict along the Kubernetes history.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use lkg::api::{BisectionView, ProviderView};
use lkg::{CommitRange, PairReport, Verdict, VersionSet};
use maud::{Markup, html};
use serde::{Deserialize, Serialize};

use super::Source;
use super::layout::{error_page, negotiate, revision_link, short};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LkgPage {
    /// The release line shown, and every line (newest first).
    pub line: String,
    pub lines: Vec<String>,
    pub version_set: Option<VersionSet>,
    pub providers: Vec<ProviderView>,
    pub loaded_at: i64,
}

/// `?line=`.
#[derive(Debug, Deserialize)]
pub struct LineQuery {
    line: Option<String>,
}

pub async fn page(
    State(source): State<Arc<dyn Source>>,
    Query(query): Query<LineQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(snapshot) = source.lkg() else {
        return error_page(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "no LKG is loaded yet: the server computes it at start and every --refresh",
        );
    };
    let line = query.line.filter(|line| !line.is_empty());
    let (line, engine) = match snapshot.line(line.as_deref()) {
        Ok(found) => found,
        Err(error) => return error_page(axum::http::StatusCode::NOT_FOUND, &error.to_string()),
    };
    // Each provider's report once (not the engine's whole report, then each again with its links).
    let providers =
        engine.providers().filter_map(|name| lkg::api::provider(&snapshot, Some(&line), name).ok()).collect();
    let view = LkgPage {
        lines: snapshot.line_names(),
        line,
        version_set: engine.version_set(),
        providers,
        loaded_at: snapshot.loaded_at,
    };
    negotiate(&headers, &view, "Last known good", |view| render(view, source.as_ref()))
}

fn render(view: &LkgPage, source: &dyn Source) -> Markup {
    let kubernetes = source.repo("kubernetes");
    html! {
        h1 { "Last known good" }
        nav.lines aria-label="release lines" {
            "Release line: "
            @for line in &view.lines {
                @if *line == view.line { strong aria-current="page" { (line) } " " }
                @else { a href={ "/lkg?line=" (line) } { (line) } " " }
            }
        }
        section.versionset aria-label="version set" {
            @match &view.version_set {
                Some(set) => {
                    strong { "Version set: " } "Kubernetes " (revision_link(kubernetes.as_deref(), &set.kubernetes_commit))
                    @for (provider, pair) in &set.providers { " · " (provider) " " (revision_link(source.repo(provider).as_deref(), &pair.provider_commit)) }
                }
                None => "No Kubernetes commit is good with every provider in the version set yet.",
            }
        }
        @for provider in &view.providers {
            @let repo = source.repo(&provider.provider);
            section.provider id={ "provider-" (provider.provider) } {
                h2 { (provider.provider) }
                dl.meta {
                    dt { "LKG" }
                    dd { (pair(provider, provider.report.lkg.as_ref(), kubernetes.as_deref(), repo.as_deref())) }
                    dt { "newest tested" }
                    dd { (pair(provider, provider.report.newest.as_ref(), kubernetes.as_deref(), repo.as_deref())) }
                }
                @if let Some(culprit) = &provider.report.culprit {
                    h3 { "Culprit ranges" }
                    ul.culprits {
                        @if let Some(range) = &culprit.kubernetes { li { "Kubernetes: " (commit_range(range, kubernetes.as_deref())) } }
                        @if let Some(range) = &culprit.provider { li { (provider.provider) ": " (commit_range(range, repo.as_deref())) } }
                    }
                }
                @if let Some(bisection) = &provider.bisection { (bisection_status(bisection, repo.as_deref())) }
                h3 { "History" }
                (history_chart(&provider.provider, &provider.report.pairs))
            }
        }
    }
}

fn pair(view: &ProviderView, pair: Option<&PairReport>, kubernetes: Option<&str>, repo: Option<&str>) -> Markup {
    let Some(pair) = pair else { return html! { "none yet" } };
    html! {
        span class=(verdict_class(pair.verdict)) { (verdict_class(pair.verdict)) } " "
        "Kubernetes " (revision_link(kubernetes, &pair.kubernetes_commit)) " · provider " (revision_link(repo, &pair.provider_commit))
        " · builds "
        @for build in pair.evidence.iter().chain(&pair.bad_runs) {
            @match view.builds.get(build) {
                Some(link) => { a href=(build_href(&link.artifacts_url, build)) title=(link.artifacts_url) { (build) } " " }
                None => { (build) " " }
            }
        }
    }
}

/// The harness names runs `JOB/BUILD` in the LKG; anything else links to its artifacts.
fn build_href(artifacts_url: &str, build: &str) -> String {
    match build.rsplit_once('/') {
        Some((job, id)) => format!("/job/{job}/build/{id}"),
        None => artifacts_url.to_owned(),
    }
}

/// `harness bisect` on the culprit range: its builds, and the commit it narrowed the range to, or
/// how many commits are left.
fn bisection_status(bisection: &BisectionView, repo: Option<&str>) -> Markup {
    html! {
        p.bisection {
            "Bisection (" a href={ "/job/" (bisection.job) } { (bisection.job) } ", "
            (bisection.builds.len()) " build" @if bisection.builds.len() != 1 { "s" } "): "
            @match &bisection.narrowed_to {
                Some(commit) => { "first bad commit " strong { (revision_link(repo, commit)) } }
                None => { "in progress or stopped, " (bisection.commits_left) " commits left in the range" }
            }
        }
    }
}

fn commit_range(range: &CommitRange, repo: Option<&str>) -> Markup {
    html! {
        (revision_link(repo, &range.last_good)) " (last good) … " (revision_link(repo, &range.first_bad)) " (first bad), "
        (range.commits.len()) " commit" @if range.commits.len() != 1 { "s" }
        @if let Some(repo) = repo.filter(|r| r.starts_with("https://")) {
            " · " a href={ (repo.trim_end_matches('/')) "/compare/" (range.last_good) "..." (range.first_bad) } { "compare" }
        }
        details { summary { "commits" } ol { @for commit in &range.commits { li { (revision_link(repo, commit)) } } } }
    }
}

fn verdict_class(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Good => "good",
        Verdict::Pending => "pending",
        Verdict::Bad => "bad",
    }
}

const SQUARE: usize = 14;

/// One column per Kubernetes commit tested (oldest left), one square per provider commit tested
/// with it (newest on top), coloured by verdict; each square's `<title>` says what it is.
fn history_chart(provider: &str, pairs: &[PairReport]) -> Markup {
    let mut columns: Vec<(&str, Vec<&PairReport>)> = Vec::new();
    for pair in pairs.iter().rev() {
        match columns.last_mut() {
            Some((commit, stacked)) if *commit == pair.kubernetes_commit => stacked.insert(0, pair),
            _ => columns.push((&pair.kubernetes_commit, vec![pair])),
        }
    }
    let height = columns.iter().map(|(_, stacked)| stacked.len()).max().unwrap_or(0) * SQUARE;
    let width = columns.len() * SQUARE;
    let good = pairs.iter().filter(|p| p.verdict == Verdict::Good).count();
    let label =
        format!("{provider}: {} pairs tested over {} Kubernetes commits, {good} good", pairs.len(), columns.len());
    if pairs.is_empty() {
        return html! { p { "Never run." } };
    }
    html! {
        svg.history xmlns="http://www.w3.org/2000/svg" role="img" aria-label=(label)
            width=(width) height=(height) viewBox={ "0 0 " (width) " " (height) } {
            title { (label) }
            @for (x, (commit, stacked)) in columns.iter().enumerate() {
                @for (y, pair) in stacked.iter().enumerate() {
                    rect class=(verdict_class(pair.verdict)) x=(x * SQUARE) y=(y * SQUARE) width=(SQUARE) height=(SQUARE) {
                        title { "Kubernetes " (short(commit)) ", provider " (short(&pair.provider_commit)) ": " (verdict_class(pair.verdict)) }
                    }
                }
            }
        }
        p.axis { "older → newer Kubernetes commits; a column's squares are the provider commits tested with it, newest on top" }
        ul.legend { @for verdict in [Verdict::Good, Verdict::Pending, Verdict::Bad] { li { span class={ "cell " (verdict_class(verdict)) } {} " " (verdict_class(verdict)) } } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(kubernetes: &str, provider: &str, verdict: Verdict) -> PairReport {
        PairReport {
            kubernetes_commit: kubernetes.into(),
            provider_commit: provider.into(),
            verdict,
            evidence: vec![],
            bad_runs: vec![],
            flaky_tests: vec![],
        }
    }

    #[test]
    fn the_chart_has_a_column_per_kubernetes_commit_and_a_labelled_square_per_pair() {
        // Newest first, as ProviderReport::pairs has them.
        let pairs = [
            pair("k3", "p2", Verdict::Bad),
            pair("k2", "p2", Verdict::Good),
            pair("k2", "p1", Verdict::Bad),
            pair("k1", "p1", Verdict::Good),
        ];
        let svg = history_chart("aws", &pairs).into_string();
        assert_eq!(svg.matches("<rect ").count(), 4, "{svg}");
        assert!(svg.contains(r#"aria-label="aws: 4 pairs tested over 3 Kubernetes commits, 2 good""#), "{svg}");
        // k1 is the oldest: x=0; k2 stacks p2 (newest) on top of p1; k3 at x=28.
        assert!(svg.contains(r#"<rect class="good" x="0" y="0""#), "{svg}");
        assert!(svg.contains(r#"<rect class="good" x="14" y="0" width="14" height="14"><title>Kubernetes k2, provider p2: good</title>"#), "{svg}");
        assert!(svg.contains(r#"<rect class="bad" x="14" y="14""#), "{svg}");
        assert!(svg.contains(r#"<rect class="bad" x="28" y="0""#), "{svg}");
    }

    #[test]
    fn culprit_ranges_link_their_commits_and_a_compare_view() {
        let range =
            CommitRange { last_good: "v1.37.0".into(), first_bad: "v1.37.1".into(), commits: vec!["v1.37.1".into()] };
        let html = commit_range(&range, Some("https://github.com/kubernetes/kubernetes")).into_string();
        assert!(
            html.contains(r#"href="https://github.com/kubernetes/kubernetes/compare/v1.37.0...v1.37.1""#),
            "{html}"
        );
        assert!(html.contains(r#"href="https://github.com/kubernetes/kubernetes/tree/v1.37.1""#), "{html}");
        assert!(html.contains("1 commit ") || html.contains("1 commit<"), "{html}");
        let unlinked = commit_range(&range, Some("/srv/git/provider")).into_string();
        assert!(!unlinked.contains("href"), "a local path is no link: {unlinked}");
    }

    #[test]
    fn a_bisection_shows_its_builds_and_the_commit_it_narrowed_to() {
        let mut bisection = BisectionView {
            job: "bisect-aws-master".into(),
            builds: vec!["bisect-aws-master/1".into(), "bisect-aws-master/2".into()],
            commits_left: 1,
            narrowed_to: Some("0123456789abcdef".into()),
        };
        let html = bisection_status(&bisection, Some("https://github.com/o/aws")).into_string();
        assert!(html.contains(r#"href="/job/bisect-aws-master""#), "{html}");
        assert!(html.contains("2 builds"), "{html}");
        assert!(
            html.contains(
                r#"first bad commit <strong><a class="rev" href="https://github.com/o/aws/tree/0123456789abcdef""#
            ),
            "{html}"
        );
        (bisection.narrowed_to, bisection.commits_left) = (None, 5);
        let html = bisection_status(&bisection, None).into_string();
        assert!(html.contains("5 commits left") && !html.contains("first bad"), "{html}");
    }
}
