//! `harness lkg show|check|culprits|export`: the LKG API's answers on the command line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use lkg::api::{self, CheckVerdict, CulpritView, LkgView, ProviderView, Snapshot};
use lkg::{CommitRange, PairReport};

use super::ConfigArg;
use results::default_database_url;
use results::index::Index;
use results::known_good::export::ExportFormat;
use results::known_good::{HistorySpec, LkgOptions};

#[derive(Debug, Subcommand)]
pub enum LkgCommand {
    /// The LKG version set and each provider's LKG; with a provider, its LKG, newest pair, culprit
    /// range and every pair.
    Show {
        provider: Option<String>,
        #[command(flatten)]
        line: LineArg,
        #[command(flatten)]
        source: SourceArgs,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Is this provider version good with this Kubernetes version? Exits 0 only when it is.
    Check {
        #[arg(long)]
        provider: String,
        /// A commit id or tag of the provider's history.
        #[arg(long)]
        provider_version: String,
        /// A commit id or tag of the Kubernetes history.
        #[arg(long)]
        kubernetes: String,
        #[command(flatten)]
        line: LineArg,
        #[command(flatten)]
        source: SourceArgs,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Where the change that broke a provider must be: the commits after its LKG up to the first
    /// bad pair, on the Kubernetes side and on the provider side.
    Culprits {
        provider: String,
        #[command(flatten)]
        line: LineArg,
        #[command(flatten)]
        source: SourceArgs,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Write the Kubernetes version a provider last passed with as exactly one line, the way
    /// provider repositories pin Kubernetes (`cat FILE | tr -d '[:space:]'` reads the bare value).
    Export {
        #[arg(long)]
        provider: String,
        #[arg(long, value_enum, default_value_t = ExportFormat::Version)]
        format: ExportFormat,
        /// Write it to this file (any name: cloud-provider-gcp keeps its pin in
        /// ginko-test-package-version.env) instead of stdout.
        #[arg(long, value_name = "FILE")]
        file: Option<PathBuf>,
        /// Write the evidence (provider commit, builds) here; by default it goes to stdout when
        /// --file is given, else to stderr. Never into the version file.
        #[arg(long, value_name = "FILE")]
        evidence: Option<PathBuf>,
        #[command(flatten)]
        line: LineArg,
        #[command(flatten)]
        source: SourceArgs,
    },
    /// Publish each provider's LKG as marker objects in the store, as kops publishes
    /// `latest-ci-updown-green.txt`: `lkg/<provider>/<line>/latest-lkg.txt` (one line, the
    /// version) and `latest-lkg.json` beside it. A CI job reads the LKG with one `gsutil cat`.
    PublishMarkers {
        /// The object store [default: HARNESS_STORE, else the local store].
        #[arg(long, env = "HARNESS_STORE", value_name = "URL")]
        store: Option<String>,
        #[command(flatten)]
        source: SourceArgs,
    },
}

/// Where the runs and the commit histories come from.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// The SQL index the builds were published to [default: the local SQLite index of `harness run`].
    #[arg(long, env = "DATABASE_URL", value_name = "URL")]
    pub database: Option<String>,
    #[command(flatten)]
    pub config: ConfigArg,
    /// The kubernetes/kubernetes history: `tested` (the versions the index has runs of, ordered as
    /// releases), `git:PATH[@BRANCH]`, `github:OWNER/REPO[@BRANCH]` or `goproxy:MODULE[@BRANCH]` (a Go
    /// module's release tags from $GOPROXY; on release-1.X only v1.X.*) (branch default: master).
    #[arg(long, default_value = "tested", value_name = "SOURCE")]
    pub kubernetes_history: HistorySpec,
    /// A provider's history, as NAME=SOURCE (sources as above; branch default: the provider's
    /// `branch`); repeatable. Providers not named use `tested`.
    #[arg(long = "provider-history", value_name = "NAME=SOURCE", value_parser = parse_provider_history)]
    pub provider_histories: Vec<(String, HistorySpec)>,
    /// Commits fetched at most per history.
    #[arg(long, default_value_t = 5000)]
    pub history_depth: usize,
    /// The GitHub API for `github:` histories (a token in GITHUB_TOKEN raises the rate limit).
    #[arg(long, env = "HARNESS_GITHUB_API", default_value = "https://api.github.com")]
    pub github_api: String,
}

/// `--line`.
#[derive(Debug, Args)]
pub struct LineArg {
    /// The release line: `master` (a provider's default branch against Kubernetes master) or a
    /// Kubernetes minor such as `1.36` (its `release-1.36` branch) [default: the newest line].
    #[arg(long, value_name = "LINE")]
    pub line: Option<String>,
}

impl SourceArgs {
    /// The SQL index to read.
    pub fn database(&self) -> String {
        self.database.clone().unwrap_or_else(default_database_url)
    }

    pub fn options(&self) -> LkgOptions {
        LkgOptions {
            kubernetes_history: self.kubernetes_history.clone(),
            provider_histories: self.provider_histories.iter().cloned().collect(),
            depth: self.history_depth,
            github_api: self.github_api.clone(),
        }
    }

    async fn snapshot(&self) -> Result<Snapshot> {
        let config = self.config.load()?;
        let index = Index::open_existing(&self.database()).await?;
        let snapshot = results::known_good::load(&config, &self.options(), &index).await;
        index.close().await;
        snapshot
    }
}

fn parse_provider_history(text: &str) -> Result<(String, HistorySpec), String> {
    let (name, spec) = text.split_once('=').ok_or_else(|| format!("{text:?}: expected NAME=SOURCE"))?;
    Ok((name.to_owned(), spec.parse()?))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
}

pub async fn run_lkg(command: LkgCommand) -> Result<()> {
    match command {
        LkgCommand::Show { provider: None, line, source, output } => {
            let snapshot = source.snapshot().await?;
            let line = line.line.as_deref();
            let view = api::lkg(&snapshot, line)?;
            let providers = view
                .providers
                .keys()
                .map(|name| api::provider(&snapshot, line, name))
                .collect::<Result<Vec<_>, _>>()?;
            print(output, &view, || lkg_table(&view, &providers))
        }
        LkgCommand::Show { provider: Some(name), line, source, output } => {
            let view = api::provider(&source.snapshot().await?, line.line.as_deref(), &name)?;
            print(output, &view, || provider_table(&view))
        }
        LkgCommand::Check { provider, provider_version, kubernetes, line, source, output } => {
            let snapshot = source.snapshot().await?;
            let view = api::check(&snapshot, line.line.as_deref(), &provider, &provider_version, &kubernetes)?;
            print(output, &view, || {
                let verdict = serde_json::to_value(view.verdict).ok().and_then(|v| v.as_str().map(str::to_owned));
                let verdict = verdict.unwrap_or_default();
                let mut text = format!(
                    "{provider} {provider_version} with Kubernetes {kubernetes}: {verdict} ({})\n",
                    view.reason
                );
                if let Some(pair) = &view.pair {
                    text += &evidence_lines(pair, &view.builds);
                }
                text
            })?;
            if view.verdict != CheckVerdict::Good {
                bail!("{provider} {provider_version} is not known good with Kubernetes {kubernetes}: {}", view.reason);
            }
            Ok(())
        }
        LkgCommand::Culprits { provider, line, source, output } => {
            let view = api::culprits(&source.snapshot().await?, line.line.as_deref(), &provider)?;
            print(output, &view, || culprit_table(&view))
        }
        LkgCommand::Export { provider, format, file, evidence, line, source } => {
            let snapshot = source.snapshot().await?;
            let export = results::known_good::export::Export::of(&snapshot, line.line.as_deref(), &provider)?;
            let line = export.line(format);
            let evidence_text = export.evidence_text();
            match &file {
                Some(path) => write_file(path, &line)?,
                None => print!("{line}"),
            }
            match (&evidence, &file) {
                (Some(path), _) => write_file(path, &evidence_text),
                (None, Some(_)) => {
                    print!("{evidence_text}");
                    Ok(())
                }
                (None, None) => {
                    eprint!("{evidence_text}");
                    Ok(())
                }
            }
        }
        LkgCommand::PublishMarkers { store, source } => {
            let snapshot = source.snapshot().await?;
            let store = results::store::ResultStore::open(&store.unwrap_or_else(results::default_store_url))?;
            let written = results::known_good::export::publish_markers(&store, &snapshot).await?;
            println!("{written} marker object(s) written under {}", store.url_of("lkg/"));
            Ok(())
        }
    }
}

fn write_file(path: &std::path::Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn print<T: serde::Serialize>(output: Output, view: &T, table: impl FnOnce() -> String) -> Result<()> {
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(view)?),
        Output::Table => print!("{}", table()),
    }
    Ok(())
}

/// A commit id shortened as git does; tags and short ids as they are.
fn short(revision: &str) -> &str {
    let is_sha = revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit());
    if is_sha { &revision[..12] } else { revision }
}

fn pair_cells(pair: Option<&PairReport>) -> [String; 3] {
    match pair {
        Some(pair) => {
            [short(&pair.kubernetes_commit).into(), short(&pair.provider_commit).into(), verdict(pair).into()]
        }
        None => ["-".into(), "-".into(), "-".into()],
    }
}

fn verdict(pair: &PairReport) -> &'static str {
    match pair.verdict {
        lkg::Verdict::Good => "good",
        lkg::Verdict::Pending => "pending",
        lkg::Verdict::Bad => "bad",
    }
}

fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(header.iter().map(|h| h.to_string()).collect::<Vec<_>>()).chain(rows.iter().cloned()) {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        text += cells.join("  ").trim_end();
        text += "\n";
    }
    text
}

fn lkg_table(view: &LkgView, providers: &[ProviderView]) -> String {
    let mut text = format!("Release line {} (lines: {})\n", view.line, view.lines.join(", "));
    text += &match &view.version_set {
        Some(set) => format!("LKG version set: Kubernetes {}\n", short(&set.kubernetes_commit)),
        None => "LKG version set: none (no Kubernetes commit is good with every provider yet)\n".to_string(),
    };
    if let Some(set) = &view.version_set {
        for (name, pair) in &set.providers {
            let _ = writeln!(text, "  {name} {}", short(&pair.provider_commit));
        }
    }
    text += "\n";
    let rows: Vec<Vec<String>> = providers
        .iter()
        .map(|p| {
            let [lkg_k8s, lkg_provider, _] = pair_cells(p.report.lkg.as_ref());
            let [new_k8s, new_provider, new_verdict] = pair_cells(p.report.newest.as_ref());
            let culprit = p.report.culprit.as_ref().map(culprit_summary).unwrap_or_else(|| "-".into());
            vec![p.provider.clone(), lkg_k8s, lkg_provider, new_k8s, new_provider, new_verdict, culprit]
        })
        .collect();
    text + &table(
        &["PROVIDER", "LKG KUBERNETES", "LKG PROVIDER", "NEWEST KUBERNETES", "NEWEST PROVIDER", "NEWEST", "CULPRIT"],
        &rows,
    )
}

fn culprit_summary(culprit: &lkg::Culprit) -> String {
    let side = |name: &str, range: &Option<CommitRange>| {
        range.as_ref().map(|r| {
            format!("{name} ({}, {}]: {} commit(s)", short(&r.last_good), short(&r.first_bad), r.commits.len())
        })
    };
    [side("kubernetes", &culprit.kubernetes), side("provider", &culprit.provider)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
}

fn provider_table(view: &ProviderView) -> String {
    let mut text = format!("{} on release line {}\n", view.provider, view.line);
    let describe = |pair: Option<&PairReport>| match pair {
        Some(pair) => format!(
            "Kubernetes {} with {} {}",
            short(&pair.kubernetes_commit),
            view.provider,
            short(&pair.provider_commit)
        ),
        None => "none".into(),
    };
    let _ = writeln!(text, "LKG:     {}", describe(view.report.lkg.as_ref()));
    let newest = view.report.newest.as_ref();
    let _ = writeln!(
        text,
        "Newest:  {}{}",
        describe(newest),
        newest.map(|p| format!(" ({})", verdict(p))).unwrap_or_default()
    );
    if let Some(culprit) = &view.report.culprit {
        let _ = writeln!(text, "Culprit: {}", culprit_summary(culprit));
    }
    text += "\n";
    let rows: Vec<Vec<String>> = view
        .report
        .pairs
        .iter()
        .map(|pair| {
            let [k8s, provider, verdict] = pair_cells(Some(pair));
            let builds = pair.evidence.iter().chain(&pair.bad_runs).cloned().collect::<Vec<_>>().join(" ");
            vec![k8s, provider, verdict, builds]
        })
        .collect();
    text += &table(&["KUBERNETES", "PROVIDER", "VERDICT", "BUILDS"], &rows);
    for run in &view.report.unplaced {
        let _ = writeln!(text, "unplaced: {} ({})", run.build_id, run.problems.join("; "));
    }
    text
}

fn culprit_table(view: &CulpritView) -> String {
    let Some(culprit) = &view.culprit else {
        return match (&view.lkg, &view.newest) {
            (_, None) => format!("{}: no runs yet\n", view.provider),
            (None, Some(_)) => format!("{}: never good, so there is no range to bisect from\n", view.provider),
            (Some(_), Some(_)) => format!("{}: its newest pair is good\n", view.provider),
        };
    };
    let mut text = String::new();
    for (side, range) in [("Kubernetes", &culprit.kubernetes), ("Provider", &culprit.provider)] {
        if let Some(range) = range {
            let _ = writeln!(
                text,
                "{side}: after {} up to {} ({} commit(s), newest first):",
                short(&range.last_good),
                short(&range.first_bad),
                range.commits.len()
            );
            for commit in &range.commits {
                let _ = writeln!(text, "  {commit}");
            }
        }
    }
    if let Some(bisection) = &view.bisection {
        let state = match &bisection.narrowed_to {
            Some(commit) => format!("narrowed to {commit}"),
            None => format!("{} commit(s) left", bisection.commits_left),
        };
        let _ = writeln!(text, "Bisection ({}, {} build(s)): {state}", bisection.job, bisection.builds.len());
    }
    text
}

fn evidence_lines(pair: &PairReport, builds: &BTreeMap<String, api::BuildLink>) -> String {
    let mut text = String::new();
    for (kind, ids) in [("evidence", &pair.evidence), ("bad run", &pair.bad_runs)] {
        for id in ids {
            let url = builds.get(id).map(|b| b.artifacts_url.as_str()).unwrap_or("-");
            let _ = writeln!(text, "  {kind}: {id} {url}");
        }
    }
    text
}
