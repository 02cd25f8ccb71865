//! A load of publishers posting builds to the ingestion API, for the load test and the
//! `ingest_load` benchmark: many publishers at once, each its own job and a run of builds, with
//! results chosen so the LKG they lead to is known ([`expected_lkg`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;

use results::layout::BuildLocation;
use results::remote::{self, RemoteOptions};

/// The providers the load publishes for, in turn.
pub const PROVIDERS: [&str; 2] = ["alpha", "beta"];
/// Builds of `beta` after this one fail its `gate` test: a regression for the LKG to find.
pub const BETA_BREAKS_AFTER: usize = 35;
const EPOCH: i64 = 1_790_000_000;

#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub publishers: usize,
    pub builds_each: usize,
    /// Passing test cases per build's JUnit file (beside the `gate` test).
    pub tests: usize,
}

/// What the load saw.
#[derive(Debug, Default)]
pub struct Report {
    pub created: usize,
    pub existed: usize,
    /// Publishes that failed even after their retries: `job/build: error`.
    pub errors: Vec<String>,
    /// Attempts beyond the first, over all publishes.
    pub retries: usize,
    /// Each successful publish, its retries included.
    pub latencies: Vec<Duration>,
    pub elapsed: Duration,
}

impl Report {
    /// Builds published per second.
    pub fn throughput(&self) -> f64 {
        (self.created + self.existed) as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q` quantile of the publish latencies (0.5, 0.99).
    pub fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let at = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
        sorted.get(at).copied().unwrap_or_default()
    }
}

/// The provider publisher `p` publishes for.
pub fn provider_of(publisher: usize) -> &'static str {
    PROVIDERS[publisher % PROVIDERS.len()]
}

/// Publisher `p`'s job (named so the ingestion API sees it as its provider's).
pub fn job_of(publisher: usize) -> String {
    format!("ci-cloud-provider-{}-load-{publisher}", provider_of(publisher))
}

/// The Kubernetes version build `b` (1-based) of every publisher tested.
pub fn kubernetes_version(build: usize) -> String {
    format!("v1.38.0-alpha.{build}")
}

/// The LKG the whole load leads to: each provider's LKG Kubernetes version, and the version set's.
pub fn expected_lkg(plan: &Plan) -> ([(&'static str, String); 2], String) {
    let beta = kubernetes_version(plan.builds_each.min(BETA_BREAKS_AFTER));
    ([("alpha", kubernetes_version(plan.builds_each)), ("beta", beta.clone())], beta)
}

/// Build `b` of publisher `p`, as the files of its directory.
pub fn build_files(publisher: usize, build: usize, tests: usize) -> Vec<(String, Bytes)> {
    let provider = provider_of(publisher);
    let fails = provider == "beta" && build > BETA_BREAKS_AFTER;
    let started = EPOCH + build as i64 * 60;
    let metadata = serde_json::json!({
        "provider": provider,
        "kubernetes-version": kubernetes_version(build),
        "provider-version": format!("{provider}-{build}"),
    });
    let started_json = serde_json::json!({"timestamp": started, "metadata": metadata});
    let finished_json = serde_json::json!({
        "timestamp": started + 30,
        "passed": !fails,
        "result": if fails { "FAILURE" } else { "SUCCESS" },
        "metadata": metadata,
    });
    let mut junit = format!("<testsuite name=\"load\" tests=\"{}\">\n", tests + 1);
    for t in 0..tests {
        junit.push_str(&format!(
            "  <testcase classname=\"load\" name=\"[sig-cloud-provider] load test {t}\" time=\"0.5\"/>\n"
        ));
    }
    let gate = if fails { "<failure message=\"broken\">broken</failure>" } else { "" };
    junit.push_str(&format!("  <testcase classname=\"load\" name=\"gate\" time=\"1\">{gate}</testcase>\n"));
    junit.push_str("</testsuite>\n");
    vec![
        ("started.json".into(), Bytes::from(started_json.to_string())),
        ("build-log.txt".into(), Bytes::from(format!("build {build} of {}\n", job_of(publisher)).repeat(20))),
        ("artifacts/junit_01.xml".into(), Bytes::from(junit)),
        ("finished.json".into(), Bytes::from(finished_json.to_string())),
    ]
}

/// Runs the plan against `remotes`: every publisher at once, each posting its builds in order.
/// `tokens[i]` is the token of [`PROVIDERS`]`[i]`. Publisher `p` starts on remote `p % n` (and
/// moves to the next on each retry). `progress` counts finished publishes, for fault injection.
pub async fn run(
    remotes: &[String],
    tokens: &[String; 2],
    plan: Plan,
    options: &RemoteOptions,
    progress: Arc<AtomicUsize>,
) -> Report {
    let client = reqwest::Client::builder().pool_max_idle_per_host(plan.publishers).build().expect("an HTTP client");
    let started = Instant::now();
    let publishers = (0..plan.publishers).map(|p| {
        let mut options = options.clone();
        options.remotes = remotes.iter().cycle().skip(p % remotes.len()).take(remotes.len()).cloned().collect();
        options.token = tokens[p % PROVIDERS.len()].clone();
        let (client, progress) = (client.clone(), progress.clone());
        async move { publish_all(&client, p, plan, &options, &progress).await }
    });
    let mut report = Report::default();
    let mut each = futures::stream::iter(publishers).buffer_unordered(plan.publishers);
    while let Some(one) = each.next().await {
        report.created += one.created;
        report.existed += one.existed;
        report.errors.extend(one.errors);
        report.retries += one.retries;
        report.latencies.extend(one.latencies);
    }
    report.elapsed = started.elapsed();
    report
}

async fn publish_all(
    client: &reqwest::Client,
    publisher: usize,
    plan: Plan,
    options: &RemoteOptions,
    progress: &AtomicUsize,
) -> Report {
    let mut report = Report::default();
    let job = job_of(publisher);
    for build in 1..=plan.builds_each {
        let files = build_files(publisher, build, plan.tests);
        let location = BuildLocation::periodic(&job, &build.to_string()).expect("a valid job and build");
        let began = Instant::now();
        match remote::post_files(client, &files, &location, options).await {
            Ok(published) => {
                report.latencies.push(began.elapsed());
                report.retries += published.attempts - 1;
                if published.status == reqwest::StatusCode::CREATED {
                    report.created += 1;
                } else {
                    report.existed += 1;
                }
            }
            Err(error) => report.errors.push(format!("{job}/{build}: {error}")),
        }
        progress.fetch_add(1, Ordering::SeqCst);
    }
    report
}
