//! The ingestion API as the central service runs it: real `harness serve` processes on loopback,
//! a real Postgres, tokens made with `harness token create`, builds posted by `harness publish
//! --remote` and by the load driver (`testing::load`, which the `ingest_load` benchmark
//! also runs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use results::index::Index;
use results::remote::RemoteOptions;
use testing::central::{self, Replica, Service};
use testing::load::{self, Plan};

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

/// A part of a multipart body: its name, file name and bytes.
type Part<'a> = (&'a str, Option<&'a str>, &'a [u8]);

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

/// Polls `url` until its body holds `needle` (or, with `status`, until it answers that status),
/// for at most a minute: a loaded machine may take seconds to accept 40 connections.
async fn wait_for_answer(url: &str, status: Option<u16>, needle: &str) -> (u16, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (got, body) = get(url).await;
        if status.is_none_or(|s| s == got) && body.contains(needle) {
            return (got, body);
        }
        assert!(Instant::now() < deadline, "{url} never answered {status:?} with {needle:?}; last: {got} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
    let service = service(testing::fresh_postgres_database().await);
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
    // Refused as input the store cannot hold, before anything is written (never a 503 that the
    // client retries, then a half-written build): a name over a directory's 250 bytes, a file
    // beside a directory of the same path, a job name over 200 bytes, a time past year 9999;
    // and a job carrying beta's name in capitals.
    let long_name = format!("artifacts/{}.txt", "日".repeat(84));
    let long_job = format!("{alpha_job}-{}", "a".repeat(256 - alpha_job.len() - 1));
    let late = br#"{"timestamp": 300000000000, "metadata": {"provider": "alpha"}}"#;
    let refused: [(&str, Vec<Part>, u16, &str); 5] = [
        ("a long name", vec![("file", Some(&long_name), b"x")], 400, "at most 250 per name"),
        (
            "a file and a directory",
            vec![("file", Some("artifacts/x"), b"1"), ("file", Some("artifacts/x/y"), b"2")],
            400,
            "as a file and as a directory",
        ),
        ("a 256-byte job", vec![("job", None, long_job.as_bytes())], 400, "at most 200 characters"),
        ("a time past 9999", vec![("file", Some("finished.json"), late)], 400, "between 1970 and the end of 9999"),
        (
            "beta's job in capitals",
            vec![("job", None, b"ci-cloud-provider-BETA-e2e")],
            403,
            "belongs to provider \\\"beta\\\"",
        ),
    ];
    for (what, extra, want, message) in refused {
        let job: &[u8] =
            extra.iter().find(|(name, _, _)| *name == "job").map_or(alpha_job.as_bytes(), |(_, _, job)| job);
        let mut parts =
            vec![("job", None, job), ("build", None, &b"7"[..]), ("file", Some("started.json"), STARTED_ALPHA)];
        parts.extend(extra.into_iter().filter(|(name, _, _)| *name != "job"));
        let (status, body) = post(&replica, Some(&alpha), multipart(&parts)).await;
        assert!(status == want && body.contains(message), "{what}: {status} {body}");
    }
    assert_eq!(service.stored_files(), Vec::<String>::new(), "a refused publish wrote to the store");
    assert!(!service.dir.path().join("x").exists() && !work.path().join("x").exists());
    assert_eq!(index.counts().await.unwrap(), (0, 0), "a refused publish was indexed");

    // The bearer scheme in any case; a long UTF-8 name the store can hold (80 CJK characters:
    // 240 bytes, 720 percent-encoded), kept under its own name and served from its link.
    let cjk = format!("artifacts/{}.txt", "日".repeat(80));
    let parts = multipart(&[
        ("job", None, alpha_job.as_bytes()),
        ("build", None, b"cjk"),
        ("file", Some("started.json"), STARTED_ALPHA),
        ("file", Some(&cjk), "漢字".as_bytes()),
    ]);
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/builds", replica.url))
        .header("Content-Type", "multipart/form-data; boundary=BOUNDARY")
        .header("Authorization", format!("BEARER {alpha}"))
        .body(parts)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    assert!(service.store().join(format!("logs/{alpha_job}/cjk/{cjk}")).is_file(), "{:?}", service.stored_files());
    let build_page = format!("{}/job/{alpha_job}/build/cjk", replica.url);
    let (status, page) = get(&build_page).await;
    let link = format!("/job/{alpha_job}/build/cjk/file/artifacts/{}.txt", "%E6%97%A5".repeat(80));
    assert!(status == 200 && page.contains(&link), "{status} {page}");
    assert_eq!(get(&format!("{}{link}", replica.url)).await, (200, "漢字".to_owned()));
    // Paths that cannot exist under a build: 404, and no answer names the store's directory.
    let store_dir = service.store().display().to_string();
    for path in ["started.json/sub", &format!("artifacts/{}", "x".repeat(300))] {
        let (status, body) = get(&format!("{build_page}/file/{path}")).await;
        assert!(status == 404 && !body.contains(&store_dir), "{path}: {status} {body}");
    }
    // Uploaded files are served inert: text as text/plain, nosniff, a sandboxing policy.
    let response = reqwest::get(format!("{}{link}", replica.url)).await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    assert!(response.headers()["content-security-policy"].to_str().unwrap().contains("sandbox"));

    // Accepted, then the same build again: one build, answered 200 the second time.
    let output = publish(&replica, &alpha, &alpha_build, alpha_job, "1");
    assert!(output.status.success() && text(&output).contains("published file://"), "{}", text(&output));
    let output = publish(&replica, &alpha, &alpha_build, alpha_job, "1");
    assert!(output.status.success() && text(&output).contains("already published"), "{}", text(&output));
    assert_eq!(index.counts().await.unwrap(), (2, 2), "two builds, one with its two results");
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
    assert!(!text(&output).contains(&store_dir), "a 503 names the store's directory: {}", text(&output));
    assert!(index.build("ci-cloud-provider-alpha-blocked", "1").await.unwrap().is_none());
    assert_eq!(index.counts().await.unwrap(), (2, 2));

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
    // A costly grid filter from anyone: refused by its size limit (how fast: docs/benchmarks.md),
    // and counted.
    let (status, page) = get(&format!("{}/job/{alpha_job}?test=%5Cw%7B1000%7D", replica.url)).await;
    assert!(status == 400 && page.contains("too complex"), "{status} {page}");
    let (_, metrics) = get(&format!("{}/metrics", replica.url)).await;
    for line in [
        "harness_dashboard_filter_rejects_total{reason=\"too_complex\"} 1",
        "harness_publishes_total{provider=\"alpha\",outcome=\"created\"} 2",
        "harness_publishes_total{provider=\"alpha\",outcome=\"exists\"} 1",
        "harness_publishes_total{provider=\"\",outcome=\"unauthenticated\"} 3",
        "harness_publishes_total{provider=\"alpha\",outcome=\"forbidden\"} 3",
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
    assert!(views.windows(2).all(|w| w[0] == w[1]), "the replicas disagree: {views:#?}");
    let (recorded_generation, recorded) = index.latest_lkg().await.unwrap().expect("an LKG recorded");
    assert_eq!(recorded_generation, generation);
    // Recorded per release line; these providers keep only `master`.
    let recorded: serde_json::Value = serde_json::from_str(&recorded).unwrap();
    assert_eq!(recorded.as_object().unwrap().keys().collect::<Vec<_>>(), ["master"]);
    assert_eq!(recorded["master"], views[0], "the recorded LKG");
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
    let service = service(testing::fresh_postgres_database().await);
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
    let postgres = testing::OwnPostgres::start();
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

/// An upload that sends its head and 50 bytes of its body, then nothing: its status and when it
/// was answered, or `None` when it never was (within 30 s).
fn stall(replica: &Replica, token: &str) -> tokio::task::JoinHandle<Option<(u16, Duration)>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = replica.url.trim_start_matches("http://").to_owned();
    let token = token.to_owned();
    tokio::spawn(async move {
        let started = Instant::now();
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST /api/v1/builds HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary=BOUNDARY\r\nContent-Length: 100000\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream
            .write_all(&b"--BOUNDARY\r\nContent-Disposition: form-data; name=\"job\"\r\n\r\nci-"[..50])
            .await
            .unwrap();
        let mut answer = vec![0; 64];
        let read = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut answer)).await;
        read.ok()?.ok().filter(|n| *n >= 12)?;
        let status = std::str::from_utf8(&answer[9..12]).ok()?.parse().ok()?;
        Some((status, started.elapsed()))
    })
}

/// A valid build of `provider` as a raw multipart body.
fn small_build(provider: &str, build: &str) -> Vec<u8> {
    let started = format!(r#"{{"timestamp": 1790000000, "metadata": {{"provider": "{provider}"}}}}"#);
    let job = format!("ci-cloud-provider-{provider}-e2e");
    multipart(&[
        ("job", None, job.as_bytes()),
        ("build", None, build.as_bytes()),
        ("file", Some("started.json"), started.as_bytes()),
    ])
}

/// 40 stalled uploads of one provider take only its share of the upload places: another
/// provider's publish is answered at once, the stalls time out (408, or 503 for those that never
/// got a place), and /readyz says when every place is taken.
#[tokio::test(flavor = "multi_thread")]
async fn one_providers_stalled_uploads_neither_starve_the_others_nor_last() {
    let service = service(testing::fresh_postgres_database().await);
    let (alpha, beta) = (service.token("alpha"), service.token("beta"));
    // The stalls hold their places for the read timeout: a publish that waited behind them would
    // take that long, so a bound well under it tells a fair share from starvation on any machine.
    let read_timeout = Duration::from_secs(10);
    let replica = service.replica("stalls", &["--concurrent-uploads", "8", "--upload-read-timeout", "10s"]);
    let stalls: Vec<_> = (0..40).map(|_| stall(&replica, &alpha)).collect();
    let metrics_url = format!("{}/metrics", replica.url);
    wait_for_answer(&metrics_url, None, "harness_uploads_in_flight 4\n").await;

    let started = Instant::now();
    let (status, body) = post(&replica, Some(&beta), small_build("beta", "1")).await;
    let took = started.elapsed();
    assert_eq!(status, 201, "{body}");
    eprintln!("beta's publish took {took:?} beside 40 stalled uploads of alpha (the issue asks for under 1 s)");
    assert!(took < read_timeout / 2, "beta's publish took {took:?}: it waited behind alpha's stalled uploads");
    let (_, metrics) = get(&metrics_url).await;
    assert!(metrics.contains("harness_uploads_in_flight 4\n"), "alpha holds more than its share:\n{metrics}");
    assert_eq!(get(&format!("{}/readyz", replica.url)).await, (200, "ok".to_owned()));

    // Beta's own stalls take the other 4 places: not ready while every place is taken.
    let more: Vec<_> = (0..4).map(|_| stall(&replica, &beta)).collect();
    let (_, body) = wait_for_answer(&format!("{}/readyz", replica.url), Some(503), "uploads saturated").await;
    assert!(body.contains("uploads saturated (8 of 8"), "{body}");

    let mut statuses = Vec::new();
    for stalled in stalls.into_iter().chain(more) {
        let (status, after) = stalled.await.unwrap().expect("a stalled upload was never answered");
        // Each is cut at the read timeout (or refused a place after waiting as long): never left open.
        assert!(after < read_timeout * 3, "a stalled upload was answered after {after:?}");
        statuses.push(status);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 408).count(),
        statuses.len() - statuses.iter().filter(|s| **s == 503).count(),
        "{statuses:?}"
    );
    assert!(statuses.iter().filter(|s| **s == 408).count() >= 8, "{statuses:?}");
    assert_eq!(get(&format!("{}/readyz", replica.url)).await, (200, "ok".to_owned()));
    let audit = replica.audit_log();
    assert!(audit.contains("outcome=\"timeout\"") && audit.contains("--upload-read-timeout"), "{audit}");
}

/// SIGTERM with an upload stalled in flight: serve exits within --shutdown-timeout.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_exits_within_the_shutdown_timeout_even_with_a_stalled_upload() {
    let service = service(testing::fresh_postgres_database().await);
    let alpha = service.token("alpha");
    let mut replica = service.replica("shutdown", &["--upload-read-timeout", "60s", "--shutdown-timeout", "2s"]);
    let stalled = stall(&replica, &alpha);
    wait_for_answer(&format!("{}/metrics", replica.url), None, "harness_uploads_in_flight 1\n").await;
    let started = Instant::now();
    let exited = replica.terminate(Duration::from_secs(30));
    let took = started.elapsed();
    // Within the 30 s waited, half the stalled upload's 60 s read timeout: the shutdown deadline,
    // not the upload, ended it.
    assert!(exited.is_some_and(|status| status.success()), "serve did not exit within 30 s of SIGTERM");
    assert!(took >= Duration::from_secs(2), "exited after {took:?}, before its shutdown timeout");
    eprintln!("serve exited {took:?} after SIGTERM with an upload stalled (--shutdown-timeout 2s)");
    stalled.abort();
}

/// Trials of each race: every one must have exactly one winner.
const TRIALS: usize = 20;

/// The files of a finished build of `provider`, every one of them marked with `tag` (so two
/// builds differ in each file): a JUnit file `junit_<tag>.xml` of two tests, the second failing
/// unless `passed`.
fn finished_files(provider: &str, passed: bool, tag: &str) -> BTreeMap<String, String> {
    let metadata =
        format!(r#"{{"kubernetes-version": "v1.37.1", "provider": "{provider}", "provider-version": "{tag}"}}"#);
    let (result, failure) = if passed { ("SUCCESS", "") } else { ("FAILURE", r#"<failure message="boom"/>"#) };
    BTreeMap::from([
        ("started.json".to_owned(), format!(r#"{{"timestamp": 1790000000, "metadata": {metadata}}}"#)),
        (
            "finished.json".to_owned(),
            format!(r#"{{"timestamp": 1790000600, "passed": {passed}, "result": "{result}", "metadata": {metadata}}}"#),
        ),
        ("build-log.txt".to_owned(), format!("run {tag}\n")),
        (
            format!("artifacts/junit_{tag}.xml"),
            format!(
                r#"<testsuite name="e2e"><testcase name="{tag} works"/><testcase name="{tag} checks">{failure}</testcase></testsuite>"#
            ),
        ),
    ])
}

/// A multipart body posting `files` as build `build` of `job`; a presubmit of `(org_repo, pr)`.
fn build_body(job: &str, build: &str, pull: Option<(&str, &str)>, files: &BTreeMap<String, String>) -> Vec<u8> {
    let mut parts: Vec<Part> = vec![("job", None, job.as_bytes()), ("build", None, build.as_bytes())];
    if let Some((org_repo, pr)) = pull {
        parts.extend([("org_repo", None, org_repo.as_bytes()), ("pull", None, pr.as_bytes())]);
    }
    parts.extend(files.iter().map(|(path, text)| ("file", Some(path.as_str()), text.as_bytes())));
    multipart(&parts)
}

/// Every file of a build directory in the store, with its text.
fn stored_build(service: &Service, dir: &str) -> BTreeMap<String, String> {
    let prefix = format!("{dir}/");
    service
        .stored_files()
        .into_iter()
        .filter_map(|file| {
            let relative = file.strip_prefix(&prefix)?.to_owned();
            Some((relative, std::fs::read_to_string(service.store().join(&file)).unwrap()))
        })
        .collect()
}

/// The names of a build's results in the index, sorted.
async fn result_names(index: &Index, path: &str) -> Vec<String> {
    let snapshot = index.snapshot().await.unwrap();
    let mut names: Vec<String> = snapshot
        .results
        .iter()
        .filter(|(job, build, _)| path.ends_with(&format!("/{job}/{build}")))
        .map(|(_, _, result)| result.name.clone())
        .collect();
    names.sort();
    names
}

/// Item 1 of issue 19: two posts of one build id with different content at the same moment, to
/// two replicas: one 201, one 409, and the stored and indexed build is wholly the winner's. The
/// same content posted twice at once is one 201 and one 200.
#[tokio::test(flavor = "multi_thread")]
async fn one_build_id_posted_with_two_contents_at_once_has_exactly_one_winner_across_replicas() {
    let service = service(testing::fresh_postgres_database().await);
    let alpha = service.token("alpha");
    let (one, two) = (service.replica("one", &[]), service.replica("two", &[]));
    let index = service.index().await;
    let job = "ci-cloud-provider-alpha-e2e";
    for trial in 0..TRIALS {
        let build = format!("race-{trial}");
        let (a, b) = (finished_files("alpha", true, "a"), finished_files("alpha", false, "b"));
        let ((status_a, answer_a), (status_b, answer_b)) = tokio::join!(
            post(&one, Some(&alpha), build_body(job, &build, None, &a)),
            post(&two, Some(&alpha), build_body(job, &build, None, &b)),
        );
        let (winner, passed, tag) = match (status_a, status_b) {
            (201, 409) => (&a, true, "a"),
            (409, 201) => (&b, false, "b"),
            _ => panic!("trial {trial}: not one winner: {status_a} {answer_a} / {status_b} {answer_b}"),
        };
        let dir = format!("logs/{job}/{build}");
        assert_eq!(stored_build(&service, &dir), *winner, "trial {trial}: the store holds a mix");
        let info = index.build(job, &build).await.unwrap().unwrap();
        assert_eq!(info.passed, Some(passed), "trial {trial}");
        assert_eq!(
            result_names(&index, &dir).await,
            [format!("{tag} checks"), format!("{tag} works")],
            "trial {trial}"
        );
    }
    for trial in 0..TRIALS / 2 {
        let build = format!("twin-{trial}");
        let a = finished_files("alpha", true, "a");
        let ((x, answer_x), (y, answer_y)) = tokio::join!(
            post(&one, Some(&alpha), build_body(job, &build, None, &a)),
            post(&two, Some(&alpha), build_body(job, &build, None, &a)),
        );
        let mut statuses = [x, y];
        statuses.sort();
        assert_eq!(statuses, [200, 201], "trial {trial}: {answer_x} / {answer_y}");
        assert_eq!(stored_build(&service, &format!("logs/{job}/{build}")), a);
    }
    assert_eq!(index.counts().await.unwrap(), ((TRIALS + TRIALS / 2) as i64, ((TRIALS + TRIALS / 2) * 2) as i64));
}

/// Item 2 of issue 19: two providers posting to a new job at the same moment, to two replicas:
/// the first claim wins, the other gets 403, and nothing of the loser's build is stored.
#[tokio::test(flavor = "multi_thread")]
async fn two_providers_claiming_a_new_job_at_once_leave_it_to_exactly_one() {
    let service = service(testing::fresh_postgres_database().await);
    let (alpha, beta) = (service.token("alpha"), service.token("beta"));
    let (one, two) = (service.replica("one", &[]), service.replica("two", &[]));
    let index = service.index().await;
    for trial in 0..TRIALS {
        // A name that carries no provider's, in no providers.yaml: whoever claims it first owns it.
        let job = format!("shared-e2e-{trial}");
        let (a, b) = (finished_files("alpha", true, "a"), finished_files("beta", true, "b"));
        let ((status_a, answer_a), (status_b, answer_b)) = tokio::join!(
            post(&one, Some(&alpha), build_body(&job, "1", None, &a)),
            post(&two, Some(&beta), build_body(&job, "2", None, &b)),
        );
        let (owner, won, lost) = match (status_a, status_b) {
            (201, 403) => ("alpha", "1", "2"),
            (403, 201) => ("beta", "2", "1"),
            _ => panic!("trial {trial}: not one owner: {status_a} {answer_a} / {status_b} {answer_b}"),
        };
        let loser = if owner == "alpha" { answer_b } else { answer_a };
        assert!(loser.contains(&format!("belongs to provider \\\"{owner}\\\"")), "trial {trial}: {loser}");
        assert_eq!(index.job_provider(&job).await.unwrap().as_deref(), Some(owner), "trial {trial}");
        assert!(!stored_build(&service, &format!("logs/{job}/{won}")).is_empty(), "trial {trial}");
        assert!(
            stored_build(&service, &format!("logs/{job}/{lost}")).is_empty(),
            "trial {trial}: the loser's build was stored"
        );
        let builds: Vec<String> = index.latest_builds(&job, 10).await.unwrap().into_iter().map(|b| b.build).collect();
        assert_eq!(builds, [won], "trial {trial}");
    }
}

/// Item 3 of issue 19: a presubmit with the job and build id of a finished periodic build is a
/// build of its own (`pr-logs/pull/<org_repo>/<pr>/…`): it replaces nothing, `harness index` keeps
/// both verdicts, and posted at the same moment to two replicas both are stored and indexed whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_presubmit_never_overwrites_the_periodic_build_of_the_same_id() {
    let service = service(testing::fresh_postgres_database().await);
    let alpha = service.token("alpha");
    let (one, two) = (service.replica("one", &[]), service.replica("two", &[]));
    let index = service.index().await;
    let job = "ci-cloud-provider-alpha-e2e";
    let pull = Some(("kubernetes_cloud-provider-alpha", "42"));
    let presubmit_dir = |build: &str| format!("pr-logs/pull/kubernetes_cloud-provider-alpha/42/{job}/{build}");
    let (periodic, presubmit) = (finished_files("alpha", true, "p"), finished_files("alpha", false, "q"));

    let (status, answer) = post(&one, Some(&alpha), build_body(job, "5", None, &periodic)).await;
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = post(&one, Some(&alpha), build_body(job, "5", pull, &presubmit)).await;
    assert!(status == 201 && answer.contains("\"indexed\":\"inserted\""), "{status} {answer}");
    let check = |when: &'static str| {
        let (index, service, presubmit_dir) = (&index, &service, &presubmit_dir);
        let (periodic, presubmit) = (&periodic, &presubmit);
        async move {
            assert_eq!(stored_build(service, &format!("logs/{job}/5")), *periodic, "{when}");
            assert_eq!(stored_build(service, &presubmit_dir("5")), *presubmit, "{when}");
            // The build page's /job/<job>/build/5 is the periodic build.
            assert_eq!(index.build(job, "5").await.unwrap().unwrap().passed, Some(true), "{when}");
            let builds = index.snapshot().await.unwrap().builds;
            let verdicts: BTreeMap<String, Option<bool>> = builds.iter().map(|b| (b.path.clone(), b.passed)).collect();
            let want = BTreeMap::from([(format!("logs/{job}/5"), Some(true)), (presubmit_dir("5"), Some(false))]);
            assert_eq!(verdicts, want, "{when}");
        }
    };
    check("after the posts").await;
    let output = harness()
        .args(["index", "--database", &service.database])
        .arg("--store")
        .arg(service.store())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    check("after harness index").await;
    let output = harness()
        .args(["index", "--database", &service.database])
        .arg("--store")
        .arg(service.store())
        .output()
        .unwrap();
    assert!(text(&output).contains("0 new, 0 replaced, 2 unchanged"), "{}", text(&output));

    for trial in 0..TRIALS {
        let build = format!("both-{trial}");
        let ((status_a, answer_a), (status_b, answer_b)) = tokio::join!(
            post(&one, Some(&alpha), build_body(job, &build, None, &periodic)),
            post(&two, Some(&alpha), build_body(job, &build, pull, &presubmit)),
        );
        assert_eq!((status_a, status_b), (201, 201), "trial {trial}: {answer_a} / {answer_b}");
        assert_eq!(stored_build(&service, &format!("logs/{job}/{build}")), periodic, "trial {trial}");
        assert_eq!(stored_build(&service, &presubmit_dir(&build)), presubmit, "trial {trial}");
        assert_eq!(index.build(job, &build).await.unwrap().unwrap().passed, Some(true), "trial {trial}");
    }
    assert_eq!(index.counts().await.unwrap().0, 2 + 2 * TRIALS as i64);
}

/// Item 4 of issue 19: a build is what its finishing post says: files of an earlier post without
/// finished.json that the finishing post does not hold are removed, from the store and the index.
#[tokio::test(flavor = "multi_thread")]
async fn a_finishing_post_replaces_the_files_of_an_unfinished_one() {
    let service = service(testing::fresh_postgres_database().await);
    let alpha = service.token("alpha");
    let replica = service.replica("one", &[]);
    let index = service.index().await;
    let job = "ci-cloud-provider-alpha-e2e";
    let mut early = finished_files("alpha", false, "early");
    early.remove("finished.json");
    early.insert("artifacts/early-only.txt".into(), "from the first post\n".into());
    let (status, answer) = post(&replica, Some(&alpha), build_body(job, "8", None, &early)).await;
    assert!(status == 201 && answer.contains("\"state\":\"aborted\""), "{status} {answer}");
    let mut last = finished_files("alpha", true, "last");
    last.insert("started.json".into(), early["started.json"].clone());
    let (status, answer) = post(&replica, Some(&alpha), build_body(job, "8", None, &last)).await;
    assert!(status == 201 && answer.contains("\"state\":\"finished\""), "{status} {answer}");
    let dir = format!("logs/{job}/8");
    assert_eq!(stored_build(&service, &dir), last, "the earlier post's files stayed");
    assert_eq!(result_names(&index, &dir).await, ["last checks", "last works"]);
    let info = index.build(job, "8").await.unwrap().unwrap();
    assert_eq!(info.passed, Some(true));
    // Finished now: other content under the id is refused, the same is a no-op.
    let (status, answer) = post(&replica, Some(&alpha), build_body(job, "8", None, &early)).await;
    assert_eq!(status, 409, "{answer}");
    let (status, answer) = post(&replica, Some(&alpha), build_body(job, "8", None, &last)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(stored_build(&service, &dir), last);
}

/// Writes `files` as a build directory straight into the store, as a replica that died after
/// writing the store and before indexing leaves it.
fn write_to_store(service: &Service, dir: &str, files: &BTreeMap<String, String>) {
    for (path, bytes) in files {
        let file = service.store().join(dir).join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, bytes).unwrap();
    }
}

/// Waits up to 20 s for `check` to hold.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within 20 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Item 6 of issue 19: builds the store holds and the index lacks (a replica died between the
/// two) are indexed when serve starts, and while it runs; so is a finished.json that appeared
/// since a build was indexed unfinished.
#[tokio::test(flavor = "multi_thread")]
async fn serve_indexes_what_the_store_holds_and_the_index_lacks() {
    let service = service(testing::fresh_postgres_database().await);
    let index = &service.index().await;
    let job = "ci-cloud-provider-alpha-e2e";
    write_to_store(&service, &format!("logs/{job}/1"), &finished_files("alpha", true, "one"));
    let first = service.replica("one", &[]);
    eventually("build 1 indexed on start", || async move { index.build(job, "1").await.unwrap().is_some() }).await;
    assert_eq!(index.build(job, "1").await.unwrap().unwrap().passed, Some(true));
    drop(first);

    let alpha = service.token("alpha");
    let replica = service.replica("two", &["--reconcile-every", "1s"]);
    write_to_store(&service, &format!("logs/{job}/2"), &finished_files("alpha", false, "two"));
    eventually("build 2 indexed while serving", || async move { index.build(job, "2").await.unwrap().is_some() }).await;
    assert_eq!(index.build(job, "2").await.unwrap().unwrap().passed, Some(false));
    // Indexed unfinished (a post without finished.json); its finishing post died after the store.
    let mut files = finished_files("alpha", true, "three");
    let finished = files.remove("finished.json").unwrap();
    let (status, answer) = post(&replica, Some(&alpha), build_body(job, "3", None, &files)).await;
    assert!(status == 201 && answer.contains("\"state\":\"aborted\""), "{status} {answer}");
    write_to_store(&service, &format!("logs/{job}/3"), &BTreeMap::from([("finished.json".to_owned(), finished)]));
    eventually("build 3 re-indexed finished", || async move {
        index.build(job, "3").await.unwrap().is_some_and(|b| b.passed == Some(true))
    })
    .await;
    assert_eq!(index.counts().await.unwrap(), (3, 6));
    let (_, metrics) = get(&format!("{}/metrics", replica.url)).await;
    for line in [
        "harness_reconciled_builds_total{result=\"inserted\"} 1\n",
        "harness_reconciled_builds_total{result=\"replaced\"} 1\n",
    ] {
        assert!(metrics.contains(line), "no {line} in:\n{metrics}");
    }
}

/// A `git` first on PATH that waits for `release` to exist before it runs the real one: a commit
/// history that takes as long to read as the test wants.
fn held_git(dir: &Path, release: &Path) -> PathBuf {
    let real = String::from_utf8(Command::new("sh").args(["-c", "command -v git"]).output().unwrap().stdout).unwrap();
    let bin = dir.join("held-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nwhile [ ! -e '{}' ]; do sleep 0.05; done\nexec '{}' \"$@\"\n",
        release.display(),
        real.trim()
    );
    std::fs::write(bin.join("git"), script).unwrap();
    let executable = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(bin.join("git"), executable).unwrap();
    bin
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_listens_at_once_and_answers_503_on_the_lkg_routes_only_until_the_first_load() {
    let service = service(testing::fresh_postgres_database().await);
    let repo = service.dir.path().join("kubernetes");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {}", text(&output));
    };
    git(&["init", "-q", "-b", "master"]);
    git(&["commit", "-q", "--allow-empty", "-m", "one"]);
    let release = service.dir.path().join("release");
    let path = format!("{}:{}", held_git(service.dir.path(), &release).display(), std::env::var("PATH").unwrap());
    let history = format!("git:{}", repo.display());
    let replica = service.start("held", &["--kubernetes-history", &history], &[("PATH", std::ffi::OsStr::new(&path))]);

    // Listening before the LKG is loaded: what needs no LKG answers, the LKG routes say wait.
    assert_eq!(get(&format!("{}/healthz", replica.url)).await.0, 200);
    let (status, home) = get(&format!("{}/", replica.url)).await;
    assert!(status == 200 && home.contains("still loading"), "{status} {home}");
    let response = reqwest::get(format!("{}/api/v1/lkg", replica.url)).await.unwrap();
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(response.headers()["retry-after"], "5");
    let body = response.text().await.unwrap();
    assert!(body.contains("still loading"), "{body}");
    assert_eq!(get(&format!("{}/api/v1/lkg/alpha", replica.url)).await.0, 503);
    assert_eq!(get(&format!("{}/lkg", replica.url)).await.0, 503);
    let (_, metrics) = get(&format!("{}/metrics", replica.url)).await;
    assert!(metrics.contains("harness_lkg_loaded_timestamp_seconds 0\n"), "{metrics}");

    std::fs::write(&release, "").unwrap();
    let (_, body) = wait_for_answer(&format!("{}/api/v1/lkg", replica.url), Some(200), "\"line\"").await;
    assert!(body.contains("alpha"), "{body}");
    assert_eq!(get(&format!("{}/lkg", replica.url)).await.0, 200);
    let (_, home) = get(&format!("{}/", replica.url)).await;
    assert!(home.contains("No version set yet"), "{home}");
}
