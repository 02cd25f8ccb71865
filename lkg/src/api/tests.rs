//! The router over a small engine: k1 .. k4 (v1.30.0 = k2), aws a1 .. a3, gcp g1 .. g3.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::watch;
use tower::ServiceExt;

use super::*;
use crate::{Attempt, Engine, History, ProviderPolicy, ProviderSpec, Run, TestResult};

fn run(build: &str, provider: &str, kubernetes: &str, provider_version: &str, passed: bool) -> Run {
    let attempt = if passed { Attempt::Pass } else { Attempt::Fail };
    Run {
        build_id: build.into(),
        provider: provider.into(),
        kubernetes_version: kubernetes.into(),
        provider_version: provider_version.into(),
        tests: vec![TestResult { name: "t".into(), attempts: vec![attempt] }],
        build_passed: Some(passed),
    }
}

/// aws: good at k2/a1 and k3/a2, bad at k4/a2 (culprit k4). gcp: good at k2/g1 only.
fn snapshot() -> Snapshot {
    let kubernetes = History::new(["k4", "k3", "k2", "k1"]).unwrap().with_tags([("v1.30.0", "k2")]).unwrap();
    let spec = |initial: &str| ProviderSpec {
        history: History::new((1..=3).rev().map(|n| format!("{initial}{n}"))).unwrap(),
        policy: ProviderPolicy::default(),
    };
    let providers = BTreeMap::from([("aws".to_string(), spec("a")), ("gcp".to_string(), spec("g"))]);
    let mut engine = Engine::new(kubernetes, providers);
    let runs = [
        run("job/1", "aws", "v1.30.0", "a1", true),
        run("job/2", "aws", "k3", "a2", true),
        run("job/3", "aws", "k4", "a2", false),
        run("job/4", "gcp", "k2", "g1", true),
    ];
    let mut builds = BTreeMap::new();
    for run in &runs {
        engine.add_run(run).unwrap();
        let link = BuildLink {
            artifacts_url: format!("file:///store/logs/{}", run.build_id),
            started_at: 1,
            kubernetes_version: run.kubernetes_version.clone(),
            provider_version: run.provider_version.clone(),
        };
        builds.insert(run.build_id.clone(), link);
    }
    let mut snapshot = Snapshot::single(engine, builds, 7);
    snapshot.lines.insert("1.29".into(), release_line());
    snapshot
}

/// Line 1.29: aws only, good at r1/a1 and bad at r2/a1.
fn release_line() -> Engine {
    let kubernetes = History::new(["r2", "r1"]).unwrap();
    let aws = ProviderSpec { history: History::new(["a1"]).unwrap(), policy: ProviderPolicy::default() };
    let mut engine = Engine::new(kubernetes, BTreeMap::from([("aws".to_string(), aws)]));
    engine.add_run(&run("job/r1", "aws", "r1", "a1", true)).unwrap();
    engine.add_run(&run("job/r2", "aws", "r2", "a1", false)).unwrap();
    engine
}

async fn get(uri: &str) -> (StatusCode, Value) {
    let (_tx, rx) = watch::channel(Some(Arc::new(snapshot())));
    let response = router(rx).oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{uri}: not JSON ({e}): {body:?}")))
}

#[tokio::test]
async fn the_global_lkg_is_the_newest_commit_good_with_every_provider() {
    let (status, body) = get("/api/v1/lkg").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["version_set"]["kubernetes_commit"], "k2");
    assert_eq!(body["version_set"]["providers"]["aws"]["provider_commit"], "a1");
    assert_eq!(body["providers"]["aws"]["kubernetes_commit"], "k3");
    assert_eq!(body["providers"]["gcp"]["kubernetes_commit"], "k2");
    assert_eq!(body["builds"]["job/2"]["artifacts_url"], "file:///store/logs/job/2");
}

#[tokio::test]
async fn a_provider_answer_has_its_lkg_newest_pair_culprit_and_every_pair() {
    let (status, body) = get("/api/v1/lkg/aws").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["provider"], "aws");
    assert_eq!(body["lkg"]["kubernetes_commit"], "k3");
    assert_eq!(body["newest"]["verdict"], "bad");
    assert_eq!(body["pairs"].as_array().unwrap().len(), 3);
    assert_eq!(body["builds"].as_object().unwrap().len(), 3);
}

#[tokio::test]
async fn culprits_run_from_the_lkg_to_the_first_bad_commit() {
    let (status, body) = get("/api/v1/culprits/aws").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["culprit"]["kubernetes"]["last_good"], "k3");
    assert_eq!(body["culprit"]["kubernetes"]["commits"], serde_json::json!(["k4"]));
    assert_eq!(body["culprit"]["provider"], Value::Null);
    let (_, body) = get("/api/v1/culprits/gcp").await;
    assert_eq!(body["culprit"], Value::Null, "gcp's newest pair is good");
}

#[tokio::test]
async fn check_says_good_bad_or_unknown_with_the_evidence() {
    let (status, body) = get("/api/v1/lkg/check?provider=aws&provider_version=a1&kubernetes=v1.30.0").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["verdict"], "good");
    assert_eq!(body["pair"]["evidence"], serde_json::json!(["job/1"]));
    assert_eq!(body["builds"]["job/1"]["artifacts_url"], "file:///store/logs/job/1");

    let (_, body) = get("/api/v1/lkg/check?provider=aws&provider_version=a2&kubernetes=k4").await;
    assert_eq!(body["verdict"], "bad");
    assert_eq!(body["pair"]["bad_runs"], serde_json::json!(["job/3"]));

    let (_, body) = get("/api/v1/lkg/check?provider=aws&provider_version=a3&kubernetes=k4").await;
    assert_eq!((body["verdict"].as_str(), body["reason"].as_str()), (Some("unknown"), Some("no build ran this pair")));

    let (status, body) = get("/api/v1/lkg/check?provider=aws&provider_version=a1&kubernetes=v9.9.9").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["verdict"], "unknown");
    assert!(body["reason"].as_str().unwrap().contains("\"v9.9.9\""), "{body}");
}

#[tokio::test]
async fn every_answer_is_per_release_line_and_the_default_is_the_newest() {
    let (_, body) = get("/api/v1/lkg").await;
    assert_eq!((body["line"].as_str(), &body["lines"]), (Some("master"), &serde_json::json!(["master", "1.29"])));
    let (status, body) = get("/api/v1/lkg?line=1.29").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["line"], "1.29");
    assert_eq!(body["providers"]["aws"]["kubernetes_commit"], "r1");
    assert_eq!(body["providers"].as_object().unwrap().len(), 1, "gcp keeps no 1.29 line");
    let (_, body) = get("/api/v1/culprits/aws?line=1.29").await;
    assert_eq!(body["culprit"]["kubernetes"]["commits"], serde_json::json!(["r2"]));
    let (_, body) = get("/api/v1/lkg/check?provider=aws&provider_version=a1&kubernetes=r1&line=1.29").await;
    assert_eq!((body["verdict"].as_str(), body["line"].as_str()), (Some("good"), Some("1.29")));
    let (_, body) = get("/api/v1/lkg/check?provider=aws&provider_version=a1&kubernetes=r1").await;
    assert_eq!(body["verdict"], "unknown", "r1 is not on the master line");
    for uri in ["/api/v1/lkg?line=1.99", "/api/v1/lkg/aws?line=1.99", "/api/v1/culprits/aws?line=1.99"] {
        let (status, body) = get(uri).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("\"1.99\"") && message.contains("master, 1.29"), "{uri}: {message}");
    }
    let (status, _) = get("/api/v1/lkg?colour=red").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_unknown_provider_is_a_404_naming_the_known_ones() {
    for uri in [
        "/api/v1/lkg/azure",
        "/api/v1/culprits/azure",
        "/api/v1/lkg/check?provider=azure&provider_version=x&kubernetes=k1",
    ] {
        let (status, body) = get(uri).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(body["error"]["status"], 404);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("\"azure\"") && message.contains("aws, gcp"), "{uri}: {message}");
    }
}

#[tokio::test]
async fn a_malformed_check_query_is_a_400_saying_what_is_expected() {
    for uri in [
        "/api/v1/lkg/check",
        "/api/v1/lkg/check?provider=aws&kubernetes=k1",
        "/api/v1/lkg/check?provider=aws&provider_version=&kubernetes=k1",
        "/api/v1/lkg/check?provider=aws&provider_version=a1&kubernetes=k1&color=red",
    ] {
        let (status, body) = get(uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(body["error"]["status"], 400);
        assert!(body["error"]["message"].as_str().unwrap().contains("provider_version"), "{uri}: {body}");
    }
}

#[tokio::test]
async fn a_new_snapshot_is_served_as_soon_as_it_is_sent() {
    let (tx, rx) = watch::channel(Some(Arc::new(snapshot())));
    let app = router(rx);
    let mut next = snapshot();
    next.lines.get_mut("master").unwrap().add_run(&run("job/5", "gcp", "k4", "g2", true)).unwrap();
    tx.send(Some(Arc::new(next))).unwrap();
    let response = app.oneshot(Request::get("/api/v1/lkg/gcp").body(Body::empty()).unwrap()).await.unwrap();
    let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["lkg"]["kubernetes_commit"], "k4");
}

#[tokio::test]
async fn every_route_answers_503_with_retry_after_until_the_first_snapshot_then_answers() {
    let (tx, rx) = watch::channel(None);
    let app = router(rx);
    let uris = [
        "/api/v1/lkg",
        "/api/v1/lkg/gcp",
        "/api/v1/culprits/gcp",
        "/api/v1/lkg/check?provider=gcp&provider_version=g1&kubernetes=k1",
    ];
    for uri in uris {
        let response = app.clone().oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert_eq!(response.headers()[axum::http::header::RETRY_AFTER], "5", "{uri}");
        let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert!(body["error"]["message"].as_str().unwrap().contains("still loading"), "{uri}: {body}");
    }
    tx.send(Some(Arc::new(snapshot()))).unwrap();
    for uri in uris {
        let response = app.clone().oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{uri}");
    }
}

#[test]
fn the_openapi_document_describes_exactly_the_routes() {
    let document: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(include_str!("../../openapi.yaml")).expect("lkg/openapi.yaml is YAML");
    let mut documented: Vec<&str> =
        document["paths"].as_mapping().expect("paths").keys().map(|k| k.as_str().unwrap()).collect();
    let mut served = PATHS.to_vec();
    documented.sort();
    served.sort();
    assert_eq!(documented, served);
}

/// aws on the provider side: good at k1/a1, bad at k1/a3; then `harness bisect`'s builds.
fn bisected(bisect_runs: &[Run]) -> Snapshot {
    let kubernetes = History::new(["k1"]).unwrap();
    let aws = ProviderSpec { history: History::new(["a3", "a2", "a1"]).unwrap(), policy: ProviderPolicy::default() };
    let mut engine = Engine::new(kubernetes, BTreeMap::from([("aws".to_string(), aws)]));
    let mut builds = BTreeMap::new();
    let runs = [run("ci/1", "aws", "k1", "a1", true), run("ci/2", "aws", "k1", "a3", false)];
    for (at, run) in runs.iter().chain(bisect_runs).enumerate() {
        engine.add_run(run).unwrap();
        let link = BuildLink {
            artifacts_url: format!("file:///store/logs/{}", run.build_id),
            started_at: at as i64,
            kubernetes_version: run.kubernetes_version.clone(),
            provider_version: run.provider_version.clone(),
        };
        builds.insert(run.build_id.clone(), link);
    }
    Snapshot::single(engine, builds, 7)
}

#[test]
fn the_culprit_view_shows_the_bisection_and_the_commit_it_narrowed_to() {
    let none = culprits(&bisected(&[]), None, "aws").unwrap();
    assert_eq!(none.bisection, None, "no bisect build, no bisection");
    assert_eq!(none.culprit.unwrap().provider.unwrap().commits, ["a3", "a2"]);

    let narrowed = culprits(&bisected(&[run("bisect-aws-master/9", "aws", "k1", "a2", true)]), None, "aws").unwrap();
    let bisection = narrowed.bisection.expect("a bisect build");
    assert_eq!(bisection.job, "bisect-aws-master");
    assert_eq!(bisection.builds, ["bisect-aws-master/9"]);
    assert_eq!((bisection.commits_left, bisection.narrowed_to.as_deref()), (1, Some("a3")));
    // The provider view (the dashboard's LKG page) carries the same.
    let view = provider(&bisected(&[run("bisect-aws-master/9", "aws", "k1", "a2", true)]), None, "aws").unwrap();
    assert_eq!(view.bisection.and_then(|b| b.narrowed_to).as_deref(), Some("a3"));

    // Still two commits left after a bad point at a3 itself: not narrowed yet.
    let open = culprits(&bisected(&[run("bisect-aws-master/9", "aws", "k1", "a3", false)]), None, "aws").unwrap();
    let bisection = open.bisection.unwrap();
    assert_eq!((bisection.commits_left, bisection.narrowed_to), (2, None));
}
