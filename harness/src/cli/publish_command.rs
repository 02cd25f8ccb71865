//! `harness publish` and `harness index`: the results layer's verbs.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;

use results::index::{Index, Indexed};
use results::layout::{BuildLocation, STARTED_JSON, Started, keys};
use results::publish::{self, Published};
use results::record::{ReadBuildOptions, TestStatus, Unfinished};
use results::remote::{self, RemoteOptions};
use results::store::ResultStore;
use results::{default_database_url, default_store_url};

#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Where builds are published: a directory, file:///dir, gs://bucket[/prefix] or s3://bucket[/prefix]
    /// [default: <user data dir>/cloud-provider-harness/results].
    #[arg(long, env = "HARNESS_STORE", value_name = "URL")]
    pub store: Option<String>,
    /// The SQL index: sqlite://path (created if missing) or postgres://user@host/db
    /// [default: sqlite://<user data dir>/cloud-provider-harness/index.sqlite].
    #[arg(long, env = "DATABASE_URL", value_name = "URL")]
    pub database: Option<String>,
}

impl StoreArgs {
    async fn open(&self) -> Result<(ResultStore, Index)> {
        let store = ResultStore::open(&self.store.clone().unwrap_or_else(default_store_url))?;
        let index = Index::open(&self.database.clone().unwrap_or_else(default_database_url)).await?;
        Ok((store, index))
    }
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The job name (Prow's JOB_NAME) [default: the one `harness run` wrote in the directory's
    /// started.json].
    #[arg(long, env = "JOB_NAME")]
    pub job: Option<String>,
    /// The build id (Prow's BUILD_ID) [default: the one `harness run` wrote in the directory's
    /// started.json].
    #[arg(long, env = "BUILD_ID")]
    pub build: Option<String>,
    /// The local build directory: started.json, finished.json, build-log.txt and artifacts/.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// For a presubmit: the pull request number (the build goes under pr-logs/pull/).
    #[arg(long, env = "PULL_NUMBER", requires = "org_repo")]
    pub pull: Option<u64>,
    /// For a presubmit: the repository as Prow spells it in paths, <org>_<repo>.
    #[arg(long, requires = "pull")]
    pub org_repo: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Post the build to a central `harness serve` (its base URL) instead of writing to --store and
    /// --database; repeat it (or separate with commas) for replicas: each retry goes to the next.
    #[arg(long, env = "HARNESS_REMOTE", value_name = "URL", value_delimiter = ',')]
    pub remote: Vec<String>,
    /// The publish token for --remote (`harness token create --provider P` makes one).
    #[arg(long, env = "HARNESS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Attempts in all for --remote, retrying on 5xx, 429 and connection failures with backoff.
    #[arg(long, default_value_t = 8)]
    pub attempts: usize,
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// A build without finished.json that started longer ago than this is indexed as aborted.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub running_timeout: Duration,
    /// Index only this job's periodic builds (`logs/<job>/`); repeatable. For a bucket of many
    /// jobs, such as one a provider's existing Prow jobs upload to.
    #[arg(long = "job", value_name = "JOB")]
    pub jobs: Vec<String>,
}

pub async fn run_publish(args: PublishArgs) -> Result<()> {
    let (job, build) = job_and_build(&args)?;
    let location = match (args.pull, &args.org_repo) {
        (Some(pr), Some(org_repo)) => BuildLocation::presubmit(org_repo, pr, &job, &build)?,
        _ => BuildLocation::periodic(&job, &build)?,
    };
    if !args.remote.is_empty() {
        return run_publish_remote(&args, &location).await;
    }
    let (store, index) = args.store.open().await?;
    // Whoever publishes a directory has seen its run end: no finished.json means it was killed.
    let opts = ReadBuildOptions { unfinished: Unfinished::Aborted, ..ReadBuildOptions::default() };
    let published = publish::publish(&store, &index, &args.dir, &location, &opts).await?;
    println!("{}", summary(&published, index.name()));
    let problems = published.problems();
    for p in problems {
        eprintln!("warning: {}/{}: {}", published.url, p.file, p.message);
    }
    if !problems.is_empty() {
        bail!(
            "{} file(s) of {} could not be read (listed above); everything else was published and indexed",
            problems.len(),
            published.url
        );
    }
    Ok(())
}

/// `--job` and `--build`, or what `harness run` recorded in the directory's started.json.
fn job_and_build(args: &PublishArgs) -> Result<(String, String)> {
    if let (Some(job), Some(build)) = (&args.job, &args.build) {
        return Ok((job.clone(), build.clone()));
    }
    let started = args.dir.join(STARTED_JSON);
    let metadata = std::fs::read(&started)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Started>(&bytes).ok())
        .map(|started| started.metadata)
        .unwrap_or_default();
    let recorded = |given: &Option<String>, key| given.clone().or_else(|| metadata.string(key).map(str::to_owned));
    match (recorded(&args.job, keys::HARNESS_JOB), recorded(&args.build, keys::HARNESS_BUILD)) {
        (Some(job), Some(build)) => Ok((job, build)),
        _ => bail!(
            "pass --job and --build (or JOB_NAME and BUILD_ID): {} does not name them, as a directory `harness run` wrote does",
            started.display()
        ),
    }
}

async fn run_publish_remote(args: &PublishArgs, location: &BuildLocation) -> Result<()> {
    let Some(token) = args.token.clone() else {
        bail!(
            "--remote needs --token (or HARNESS_TOKEN): the server's operator makes one with harness token create --provider P"
        );
    };
    let mut options = RemoteOptions::new(args.remote.clone(), token);
    options.attempts = args.attempts.max(1);
    let client = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build()?;
    let published = remote::publish_remote(&client, &args.dir, location, &options).await?;
    let body = &published.body;
    let outcome = if published.status == reqwest::StatusCode::CREATED { "published" } else { "already published" };
    println!(
        "{outcome} {} through {} ({} attempt(s)): {} {}",
        body["url"].as_str().unwrap_or("?"),
        published.url,
        published.attempts,
        body["state"].as_str().unwrap_or("?"),
        outcome_word(body["passed"].as_bool()),
    );
    let problems = body["problems"].as_array().cloned().unwrap_or_default();
    for p in &problems {
        eprintln!("warning: {}: {}", p["file"].as_str().unwrap_or("?"), p["message"].as_str().unwrap_or("?"));
    }
    if !problems.is_empty() {
        bail!(
            "{} file(s) could not be read by the server (listed above); everything else was published and indexed",
            problems.len()
        );
    }
    Ok(())
}

pub async fn run_index(args: IndexArgs) -> Result<()> {
    let (store, index) = args.store.open().await?;
    let opts = ReadBuildOptions {
        unfinished: Unfinished::RunningUnlessOlderThan(args.running_timeout),
        ..ReadBuildOptions::default()
    };
    let report = if args.jobs.is_empty() {
        publish::reindex(&store, &index, &opts).await?
    } else {
        publish::reindex_jobs(&store, &index, &opts, &args.jobs).await?
    };
    println!(
        "indexed {} into {}: {} new, {} replaced, {} unchanged builds",
        store.url(),
        index.name(),
        report.inserted,
        report.replaced,
        report.unchanged
    );
    for (url, p) in &report.problems {
        eprintln!("warning: {url}/{}: {}", p.file, p.message);
    }
    for failed in &report.failed {
        eprintln!("error: {failed}");
    }
    if !report.failed.is_empty() {
        bail!("{} build(s) could not be indexed (listed above); every other build was", report.failed.len());
    }
    Ok(())
}

fn summary(p: &Published, database: &str) -> String {
    let count = |status| p.record.results.iter().filter(|r| r.status == status).count();
    let indexed = match p.indexed {
        Indexed::Inserted => "indexed",
        Indexed::Replaced => "re-indexed (its content changed)",
        Indexed::Unchanged => "already indexed",
    };
    let known = match count(TestStatus::KnownFailure) {
        0 => String::new(),
        n => format!(", {n} known failures"),
    };
    format!(
        "published {}: {} file(s) written, {} unchanged; {indexed} in {database}: {} {} ({} passed, {} failed{known}, {} flaky, {} skipped)",
        p.url,
        p.written,
        p.unchanged,
        p.record.info.state.as_str(),
        outcome_word(p.record.info.passed),
        count(TestStatus::Pass),
        count(TestStatus::Fail),
        count(TestStatus::Flaky),
        count(TestStatus::Skip),
    )
}

fn outcome_word(passed: Option<bool>) -> &'static str {
    match passed {
        Some(true) => "PASSED",
        Some(false) => "FAILED",
        None => "outcome unknown",
    }
}
