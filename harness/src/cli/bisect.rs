//! `harness bisect`: find the commit that broke a provider, from its culprit range.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use super::lkg_command::{Output, SourceArgs};
use harness::bisect::{self, BisectOptions, BisectReport, Side};
use results::default_store_url;

#[derive(Debug, Args)]
pub struct BisectArgs {
    /// The provider of providers.yaml whose culprit range to bisect.
    #[arg(long)]
    pub provider: String,
    /// Which history to bisect: the provider repository's, or Kubernetes'.
    #[arg(long, value_enum, default_value_t = Side::Provider)]
    pub side: Side,
    /// The release line (`master`, or a Kubernetes minor such as `1.37`) [default: the newest].
    #[arg(long, value_name = "LINE")]
    pub line: Option<String>,
    /// Points tested at once, one run (and cluster) each: an (N+1)-ary search.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub parallel: usize,
    /// Runs of a failing point before it counts as bad (a pass in any of them makes it good)
    /// [default: the provider's flake policy, `flake.runs` of providers.yaml, else 1].
    #[arg(long, value_name = "K")]
    pub runs_per_point: Option<u32>,
    /// The good end of the range (a commit, tag or branch) instead of the LKG's culprit range; with
    /// --side kubernetes, a Kubernetes release or pre-release tag (v1.36.4), or with
    /// --kubernetes-source a commit of the checkout.
    #[arg(long, value_name = "REV", requires = "bad")]
    pub good: Option<String>,
    /// The bad end of the range (with --side kubernetes, a tag such as v1.37.1).
    #[arg(long, value_name = "REV", requires = "good")]
    pub bad: Option<String>,
    /// With --side kubernetes: the provider commit every point runs with [default: the HEAD of
    /// --repo].
    #[arg(long, value_name = "REV")]
    pub commit: Option<String>,
    /// With --side kubernetes: the tags to test between --good and --bad (comma-separated)
    /// [default: every release and pre-release tag the Go module proxy serves between them].
    #[arg(long, value_name = "TAGS", value_delimiter = ',', conflicts_with = "kubernetes_source")]
    pub points: Option<Vec<String>>,
    /// With --side kubernetes: a kubernetes/kubernetes git checkout; --good and --bad are its
    /// commits (or tags, branches), and every first-parent commit after --good up to --bad is a
    /// point, built in a worktree of its own (the checkout is left as it is).
    #[arg(long, value_name = "DIR", env = "HARNESS_KUBERNETES_SOURCE")]
    pub kubernetes_source: Option<PathBuf>,
    /// A local clone of the provider's repository [default: the git: path of its --provider-history].
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// The Kubernetes version every point runs with [default: the culprit range's first bad pair's;
    /// with --good/--bad, the line's version of the provider's matrix].
    #[arg(long, value_name = "VERSION")]
    pub kubernetes: Option<String>,
    /// Where build directories are published: a directory, file:///dir, gs:// or s3:// [default:
    /// <user data dir>/cloud-provider-harness/results].
    #[arg(long, env = "HARNESS_STORE", value_name = "URL")]
    pub store: Option<String>,
    /// Where each point's worktree and build directory go while it runs.
    #[arg(long, env = "ARTIFACTS", default_value = "./_artifacts")]
    pub artifacts: PathBuf,
    /// Each run's time for Build, Up, Deploy and Test together.
    #[arg(long, default_value = "2h", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// `table`: the answer; `json`: the whole report (every point, run, time and round, the answer).
    #[arg(long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    #[command(flatten)]
    pub source: SourceArgs,
}

pub async fn run_bisect(args: BisectArgs) -> Result<()> {
    let config = args.source.config.load()?;
    results::known_good::check_options(&config, &args.source.options())?;
    let line = args.line.clone().unwrap_or_else(|| "newest".into());
    let flake_runs = config.provider(&args.provider).map_or(1, |p| p.flake_runs);
    let options = BisectOptions {
        provider: args.provider.clone(),
        side: args.side,
        line: args.line,
        parallel: args.parallel,
        runs_per_point: args.runs_per_point.unwrap_or(flake_runs),
        good: args.good,
        bad: args.bad,
        repo: args.repo,
        kubernetes: args.kubernetes,
        commit: args.commit,
        points: args.points,
        kubernetes_source: args.kubernetes_source,
        store: args.store.unwrap_or_else(default_store_url),
        database: args.source.database(),
        lkg: args.source.options(),
        work_dir: args.artifacts.join(format!("bisect-{}-{line}", args.provider)),
        timeout: args.timeout,
    };
    let report = bisect::bisect(&config, &options).await?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Table => print!("{}", text(&report)),
    }
    Ok(())
}

/// The answer for a terminal.
fn text(report: &BisectReport) -> String {
    let mut out = String::new();
    let answer = &report.answer;
    let first = &report.first_bad;
    if answer.is_exact() && report.side == Side::Kubernetes {
        let commit = report.provider_commit.as_deref().unwrap_or_default();
        let what = if first.author.is_empty() { "version" } else { "commit" };
        let _ = writeln!(
            out,
            "first bad Kubernetes {what} for {} at {} (line {}): {}",
            report.provider,
            &commit[..12.min(commit.len())],
            report.line,
            first.commit
        );
        if !first.author.is_empty() {
            let _ = writeln!(out, "  {}\n  author {}\n  date   {}", first.subject, first.author, first.date);
        }
    } else if answer.is_exact() {
        let _ = writeln!(out, "first bad commit of {} (line {}): {}", report.provider, report.line, first.commit);
        let _ = writeln!(out, "  {}\n  author {}\n  date   {}", first.subject, first.author, first.date);
    } else {
        let _ = writeln!(
            out,
            "the first bad commit of {} (line {}) is one of {} commits: untestable points leave a range",
            report.provider,
            report.line,
            report.candidates.len()
        );
        for candidate in &report.candidates {
            let why = answer.untestable.iter().find(|u| u.commit == candidate.commit).map(|u| u.reason.as_str());
            let _ = writeln!(
                out,
                "  {} {} ({}){}",
                &candidate.commit[..12.min(candidate.commit.len())],
                candidate.subject,
                candidate.author,
                why.map(|w| format!(": untestable: {w}")).unwrap_or_else(|| ": bad".into())
            );
        }
    }
    let _ = writeln!(out, "  last good {}", answer.last_good);
    if !report.failing_tests.is_empty() {
        let _ = writeln!(out, "failing there and passing before:");
        for test in &report.failing_tests {
            let _ = writeln!(out, "  {test}");
        }
    }
    for (what, build) in [("bad build ", &report.bad_build), ("good build", &report.good_build)] {
        if let Some(build) = build {
            let _ = writeln!(out, "{what}: {}/{} {} ({})", build.job, build.build, build.artifacts_url, build.page);
        }
    }
    if !report.inconsistent.is_empty() {
        let _ = writeln!(
            out,
            "warning: points passed after the first bad one ({}): a flake or a second change",
            report.inconsistent.join(", ")
        );
    }
    let runs: usize = report.points.iter().map(|p| p.runs.len()).sum();
    let toolchains: f64 = report.points.iter().flat_map(|p| &p.runs).filter_map(|r| r.toolchain_seconds).sum();
    if report.side == Side::Kubernetes {
        let _ = writeln!(out, "toolchains pinned and built in {toolchains:.1}s of the total");
    }
    let _ = writeln!(
        out,
        "{} {} in the range, {} point(s), {runs} run(s) ({} read back from the index), {} round(s) \
         ({} expected with --parallel {}), {:.1}s",
        report.commits,
        if report.side == Side::Kubernetes { "version(s)" } else { "commit(s)" },
        report.points.len(),
        report.resumed_runs,
        report.rounds,
        report.expected_rounds,
        report.parallel,
        report.wall_seconds
    );
    out
}
