//! The ingestion API as the central service runs it: real `harness serve` processes on loopback,
//! a real Postgres, tokens made with `harness token create`, builds posted by `harness publish
//! --remote` and by the load driver (`harness::testing::load`, which the `ingest_load` benchmark
//! also runs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use harness::results::index::Index;
use harness::results::remote::RemoteOptions;
use harness::testing::central::{self, Replica, Service};
use harness::testing::load::{self, Plan};

fn harness() -> Command {
    central::harness(Path::new(env!("CARGO_BIN_EXE_harness")))
}

fn service(database: String) -> Service {
    Service::new(Path::new(env!("CARGO_BIN_EXE_harness")), database)
}

/// A build directory of provider `provider` with one passing and one failing test.
fn build_dir(root: &Path, provider: &str) -> PathBuf {
    let dir = root.join(format!("build-{provider}"));
    std::fs::create_dir_all(dir.join("artifacts")).unwrap();
    let metadata =
        format!(r#"{{"kubernetes-version": "v1.37.1", "provider": "{provider}", "provider-version": "abc"}}"#);
    std::fs::write(dir.join("started.json"), format!(r#"{{"timestamp": 1790000000, "metadata": {metadata}}}"#))
        .unwrap();
    std::fs::write(
        dir.join("finished.json"),
        format!(r#"{{"timestamp": 1790000600, "passed": false, "result": "FAILURE", "metadata": {metadata}}}"#),
    )
    .unwrap();
    std::fs::write(dir.join("build-log.txt"), "ran\n").unwrap();
    std::fs::write(
        dir.join("artifacts/junit_01.xml"),
        r#"<testsuite name="e2e"><testcase name="works"/><testcase name="breaks"><failure message="boom"/></testcase></testsuite>"#,
    )
    .unwrap();
    dir
}

fn publish(replica: &Replica, token: &str, dir: &Path, job: &str, build: &str) -> std::process::Output {
    harness()
        .args([
            "publish",
            "--job",
            job,
            "--build",
            build,
            "--remote",
            &replica.url,
            "--token",
            token,
            "--attempts",
            "2",
        ])
        .arg("--dir")
        .arg(dir)
        .output()
        .unwrap()
}

/// A raw multipart body: `(name, file name, bytes)` parts.
fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, file, bytes) in parts {
        body.extend_from_slice(b"--BOUNDARY\r\n");
        let file = file.map(|f| format!("; filename=\"{f}\"")).unwrap_or_default();
        body.extend_from_slice(format!("Content-Disposition: form-data; name=\"{name}\"{file}\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"--BOUNDARY--\r\n");
    body
}

const STARTED_ALPHA: &[u8] = br#"{"timestamp": 1790000000, "metadata": {"provider": "alpha"}}"#;

async fn post(replica: &Replica, token: Option<&str>, body: Vec<u8>) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/api/v1/builds", replica.url))
        .header("Content-Type", "multipart/form-data; boundary=BOUNDARY")
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn get(url: &str) -> (u16, String) {
    let response = reqwest::get(url).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn text(output: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn publishes_are_authenticated_per_provider_checked_whole_and_idempotent() {
    let service = service(harness::testing::fresh_postgres_database().await);
    let (alpha, beta) = (service.token("alpha"), service.token("beta"));
    let revoked = service.token("alpha");
    let index = service.index().await;
    let revoked_id = index.tokens().await.unwrap().last().unwrap().id;
    let output =
        harness().args(["token", "revoke", &revoked_id.to_string(), "--database", &service.database]).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let replica = service.replica("one", &["--max-upload-bytes", "200000"]);
    assert_eq!(get(&format!("{}/readyz", replica.url)).await, (200, "ok".to_owned()));
    let work = tempfile::tempdir().unwrap();
    let (alpha_build, beta_build) = (build_dir(work.path(), "alpha"), build_dir(work.path(), "beta"));
    let alpha_job = "ci-cloud-provider-alpha-e2e";

    // Refused: no token, a revoked one, another provider's job (by name, by its metadata).
    let valid = || {
        multipart(&[
            ("job", None, b"ci-cloud-provider-alpha-e2e"),
            ("build", None, b"7"),
            ("file", Some("started.json"), STARTED_ALPHA),
        ])
    };
    let (status, body) = post(&replica, None, valid()).await;
    assert!(status == 401 && body.contains("no token"), "{status} {body}");
    let (status, body) = post(&replica, Some(&revoked), valid()).await;
    assert!(status == 401 && body.contains("unknown or revoked"), "{status} {body}");
    let (status, body) = post(&replica, Some("chp_forged"), valid()).await;
    assert_eq!(status, 401, "{body}");
    let output = publish(&replica, &alpha, &beta_build, "ci-cloud-provider-beta-e2e", "1");
    assert!(!output.status.success() && text(&output).contains("belongs to provider \"beta\""), "{}", text(&output));
    let output = publish(&replica, &alpha, &beta_build, alpha_job, "1");
    assert!(text(&output).contains("names provider \"beta\""), "{}", text(&output));
    assert!(text(&output).contains("403"), "{}", text(&output));

    // Refused as bad input: malformed multipart, an entity bomb, a path out of the build
    // directory, a body over the limit.
    let (status, body) =
        post(&replica, Some(&alpha), b"--BOUNDARY\r\nContent-Disposition: form-data; name=\"job\"\r\n\r\nx".to_vec())
            .await;
    assert!(status == 400 && body.contains("malformed multipart"), "{status} {body}");
    let bomb = br#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]><testsuite><testcase name="&lol3;"/></testsuite>"#;
    let deep = format!("{}{}", "<testsuite>".repeat(100), "</testsuite>".repeat(100));
    let big = vec![b'x'; 300_000];
    let refusals: [(&str, &[u8], u16, &str); 4] = [
        ("artifacts/junit_bomb.xml", bomb, 400, "DOCTYPE refused"),
        ("artifacts/junit_deep.xml", deep.as_bytes(), 400, "nested more than 64 deep"),
        ("../../x", b"escaped", 400, "inside the build directory"),
        ("build-log.txt", &big, 413, "200000-byte limit"),
    ];
    for (path, bytes, want, message) in refusals {
        let parts = multipart(&[
            ("job", None, alpha_job.as_bytes()),
            ("build", None, b"7"),
            ("file", Some("started.json"), STARTED_ALPHA),
            ("file", Some(path), bytes),
        ]);
        let (status, body) = post(&replica, Some(&alpha), parts).await;
        assert!(status == want && body.contains(message), "{path}: {status} {body}");
    }
    assert_eq!(service.stored_files(), Vec::<String>::new(), "a refused publish wrote to the store");
    assert!(!service.dir.path().join("x").exists() && !work.path().join("x").exists());
    assert_eq!(index.counts().await.unwrap(), (0, 0), "a refused publish was indexed");

    // Accepted, then the same build again: one build, answered 200 the second time.
    let output = publish(&replica, &alpha, &alpha_build, alpha_job, "1");
    assert!(output.status.success() && text(&output).contains("published file://"), "{}", text(&output));
    let output = publish(&replica, &alpha, &alpha_build, alpha_job, "1");
    assert!(output.status.success() && text(&output).contains("already published"), "{}", text(&output));
    assert_eq!(index.counts().await.unwrap(), (1, 2), "one build with its two results");
    let stored = service.stored_files();
    for file in ["started.json", "finished.json", "build-log.txt", "artifacts/junit_01.xml"] {
        assert!(stored.contains(&format!("logs/{alpha_job}/1/{file}")), "{file} not in {stored:?}");
    }
    assert!(stored.contains(&format!("logs/{alpha_job}/latest-build.txt")));
    let info = index.build(alpha_job, "1").await.unwrap().unwrap();
    assert_eq!((info.provider.as_deref(), info.passed), (Some("alpha"), Some(false)));
    // The same id with other content is a conflict, and changes nothing.
    std::fs::write(alpha_build.join("build-log.txt"), "another run\n").unwrap();
    let output = publish(&replica, &alpha, &alpha_build, alpha_job, "1");
    assert!(!output.status.success() && text(&output).contains("409"), "{}", text(&output));
    assert!(text(&output).contains("build-log.txt"), "{}", text(&output));
    assert_eq!(
        std::fs::read_to_string(service.store().join(format!("logs/{alpha_job}/1/build-log.txt"))).unwrap(),
        "ran\n"
    );
    // Now alpha's job is alpha's in the index too: beta cannot take it over.
    let output = publish(&replica, &beta, &beta_build, alpha_job, "2");
    assert!(text(&output).contains("belongs to provider \"alpha\""), "{}", text(&output));

    // The store cannot be written (a file where the job's directory would be): 503, nothing indexed.
    std::fs::write(service.store().join("logs/ci-cloud-provider-alpha-blocked"), "not a directory").unwrap();
    let output = publish(&replica, &alpha, &alpha_build, "ci-cloud-provider-alpha-blocked", "1");
    assert!(!output.status.success() && text(&output).contains("503"), "{}", text(&output));
    assert!(text(&output).contains("object store"), "{}", text(&output));
    assert!(text(&output).contains("retrying in"), "a 503 is retried: {}", text(&output));
    assert!(index.build("ci-cloud-provider-alpha-blocked", "1").await.unwrap().is_none());
    assert_eq!(index.counts().await.unwrap(), (1, 2));

    // Audit: every outcome logged with provider, job and build; and counted.
    let audit = replica.audit_log();
    for needle in [
        "outcome=\"unauthenticated\"",
        "outcome=\"forbidden\"",
        "outcome=\"invalid\"",
        "outcome=\"too_large\"",
        "outcome=\"created\"",
        "outcome=\"exists\"",
        "outcome=\"conflict\"",
        "outcome=\"unavailable\"",
    ] {
        assert!(audit.contains(needle), "no {needle} in the audit log:\n{audit}");
    }
    assert!(audit.contains(&format!("provider=\"alpha\" job=\"{alpha_job}\" build=\"1\"")), "{audit}");
    let (_, metrics) = get(&format!("{}/metrics", replica.url)).await;
    for line in [
        "harness_publishes_total{provider=\"alpha\",outcome=\"created\"} 1",
        "harness_publishes_total{provider=\"alpha\",outcome=\"exists\"} 1",
        "harness_publishes_total{provider=\"\",outcome=\"unauthenticated\"} 3",
        "harness_publishes_total{provider=\"alpha\",outcome=\"forbidden\"} 2",
        "harness_publishes_total{provider=\"alpha\",outcome=\"unavailable\"} 2",
    ] {
        assert!(metrics.contains(line), "no {line} in:\n{metrics}");
    }
}

/// Waits until every replica serves the LKG of the index's current generation, then checks they
/// agree with each other, with the recorded answer, and with what the load must lead to.
async fn assert_one_lkg(replicas: &[&Replica], index: &Index, plan: &Plan) {
    let generation = index.index_generation().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    for replica in replicas {
        let want = format!("harness_lkg_index_generation {generation}\n");
        while !get(&format!("{}/metrics", replica.url)).await.1.contains(&want) {
            assert!(Instant::now() < deadline, "{} never loaded generation {generation}", replica.url);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let mut views = Vec::new();
    for replica in replicas {
        let (status, body) = get(&format!("{}/api/v1/lkg", replica.url)).await;
        assert_eq!(status, 200, "{body}");
        let mut view: serde_json::Value = serde_json::from_str(&body).unwrap();
        view["loaded_at"] = 0.into();
        views.push(view);
    }
    assert!(views.windows(2).all(|w| w[0] == w[1]), "the replicas disagree");
    let (recorded_generation, recorded) = index.latest_lkg().await.unwrap().expect("an LKG recorded");
    assert_eq!(recorded_generation, generation);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&recorded).unwrap(), views[0], "the recorded LKG");
    let (providers, version_set) = load::expected_lkg(plan);
    for (provider, kubernetes) in providers {
        assert_eq!(views[0]["providers"][provider]["kubernetes_commit"], kubernetes.as_str(), "{provider}");
    }
    assert_eq!(views[0]["version_set"]["kubernetes_commit"], version_set.as_str());
}

/// Every build of the plan indexed exactly once, with exactly its results.
async fn assert_indexed_once(index: &Index, plan: &Plan) {
    let builds = plan.publishers * plan.builds_each;
    assert_eq!(index.counts().await.unwrap(), (builds as i64, (builds * (plan.tests + 1)) as i64));
    for p in 0..plan.publishers {
        let indexed = index.latest_builds(&load::job_of(p), 1000).await.unwrap();
        assert_eq!(indexed.len(), plan.builds_each, "{}", load::job_of(p));
    }
}

const PLAN: Plan = Plan { publishers: 50, builds_each: 40, tests: 5 };

fn load_options() -> RemoteOptions {
    let mut options = RemoteOptions::new(Vec::new(), String::new());
    options.min_delay = Duration::from_millis(100);
    options.max_delay = Duration::from_secs(4);
    options.attempts = 12;
    options
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_take_50_publishers_of_40_builds_each_losing_and_doubling_none() {
    let service = service(harness::testing::fresh_postgres_database().await);
    let tokens = [service.token("alpha"), service.token("beta")];
    let (one, two) = (service.replica("one", &[]), service.replica("two", &[]));
    let remotes = [one.url.clone(), two.url.clone()];
    let report = load::run(&remotes, &tokens, PLAN, &load_options(), Arc::default()).await;
    assert_eq!(report.errors, Vec::<String>::new());
    assert_eq!((report.created, report.existed, report.retries), (2000, 0, 0));
    eprintln!(
        "2000 builds in {:.1?}: {:.0} builds/s, p50 {:?}, p99 {:?} (debug build)",
        report.elapsed,
        report.throughput(),
        report.quantile(0.5),
        report.quantile(0.99)
    );
    let index = service.index().await;
    assert_indexed_once(&index, &PLAN).await;
    assert_one_lkg(&[&one, &two], &index, &PLAN).await;
}

/// Postgres restarted a third of the way through the load, one replica killed at two thirds: the
/// publishers retry (on the other replica), and every build ends up indexed exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn builds_survive_a_postgres_restart_and_a_killed_replica_in_the_middle_of_the_load() {
    let postgres = harness::testing::OwnPostgres::start();
    let service = service(postgres.url.clone());
    let tokens = [service.token("alpha"), service.token("beta")];
    let (mut one, two) = (service.replica("one", &[]), service.replica("two", &[]));
    let remotes = [one.url.clone(), two.url.clone()];
    let progress = Arc::new(AtomicUsize::new(0));
    let total = PLAN.publishers * PLAN.builds_each;
    let load = tokio::spawn({
        let (progress, options) = (progress.clone(), load_options());
        async move { load::run(&remotes, &tokens, PLAN, &options, progress).await }
    });
    let wait_for = |share: usize| {
        let progress = progress.clone();
        async move {
            while progress.load(Ordering::SeqCst) < total * share / 3 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_for(1).await;
    let restarted = tokio::task::spawn_blocking(move || {
        postgres.down();
        std::thread::sleep(Duration::from_secs(1));
        postgres.up();
        postgres
    })
    .await
    .unwrap();
    wait_for(2).await;
    one.kill();
    let audit_at_kill = two.audit_log().lines().count();
    let report = load.await.unwrap();
    assert_eq!(report.errors, Vec::<String>::new());
    assert_eq!(report.created + report.existed, total);
    assert!(report.retries > 0, "no publish was retried: the faults did not hit the load");
    // Alpha's publishers (even numbers) post to replica one first: once it was killed, their
    // builds could only land through a retry on replica two.
    let moved = two
        .audit_log()
        .lines()
        .skip(audit_at_kill)
        .filter(|l| l.contains("publish accepted") && l.contains("job=\"ci-cloud-provider-alpha-load-"))
        .count();
    assert!(moved > 0, "no build of alpha's landed on replica two after replica one was killed");
    let index = service.index().await;
    assert_indexed_once(&index, &PLAN).await;
    assert_one_lkg(&[&two], &index, &PLAN).await;
    eprintln!(
        "with the faults: {} retries, {moved} of alpha's builds on replica two, p99 {:?}",
        report.retries,
        report.quantile(0.99)
    );
    drop(restarted);
}
