//! `harness conformance verify`: the checks `cncf/k8s-conformance` applies to a submission pull
//! request, applied to a directory, offline unless `--check-urls`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use certification::verify::{Layout, verify_layout};
use certification::{Inputs, Minor};
use harness::suites::certified_conformance::{conformance_list, newest_pinned_minor, verdict_text};

#[derive(Debug, Subcommand)]
pub enum ConformanceCommand {
    /// Check a conformance submission (README.md, PRODUCT.yaml, e2e.log, junit_01.xml in
    /// vX.Y/<product>/) against every rule of cncf/k8s-conformance's submission checks: prints
    /// each check (PASS, FAIL with the reason, or SKIP) and the pull request title; exits 1 when a
    /// check fails. `harness run --suites certified-conformance` writes such a folder and runs
    /// these checks itself.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The submission's folder (`.../v1.37/<product>`), or a folder holding `v1.37/<product>/`.
    pub dir: PathBuf,
    /// The pull request's title [default: the title the rules ask for, `Conformance results for
    /// vX.Y/<product>`].
    #[arg(long)]
    pub title: Option<String>,
    /// The current stable Kubernetes release (vX.Y); submissions for it and the two before it
    /// qualify [default: the newest release this harness pins].
    #[arg(long, value_parser = parse_minor)]
    pub stable: Option<Minor>,
    /// The release's conformance test list: the output of `e2e.test --list-conformance-tests`, or
    /// the release branch's test/conformance/testdata/conformance.yaml [default: from the
    /// installed toolchain's e2e.test of the submission's release].
    #[arg(long, value_name = "FILE")]
    pub conformance_list: Option<PathBuf>,
    /// Fetch website_url, repo_url, documentation_url and product_logo_url and check the content
    /// type each answers with (text/html; SVG or PostScript for the logo). Needs the network.
    #[arg(long)]
    pub check_urls: bool,
}

fn parse_minor(text: &str) -> Result<Minor, String> {
    text.parse()
}

pub async fn run_conformance(command: ConformanceCommand) -> Result<()> {
    match command {
        ConformanceCommand::Verify(args) => verify(args).await,
    }
}

async fn verify(args: VerifyArgs) -> Result<()> {
    if !args.dir.is_dir() {
        bail!("{} is not a directory: give the submission's folder (…/vX.Y/<product>)", args.dir.display());
    }
    // The folders name the release, whose conformance list the checks need.
    let layout = Layout::read(&args.dir).with_context(|| format!("reading {}", args.dir.display()))?;
    let conformance_list = match (&args.conformance_list, layout.release.as_deref()) {
        (Some(file), _) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading --conformance-list {}", file.display()))?;
            certification::conformance_list::parse(&text)
                .map_err(|e| anyhow::anyhow!("--conformance-list {}: {e}", file.display()))?
        }
        (None, Some(release)) => toolchain_list(release).await?,
        (None, None) => Vec::new(),
    };
    let content_types = match args.check_urls {
        true => Some(fetch_content_types(&layout).await),
        false => None,
    };
    let inputs = Inputs {
        conformance_list,
        stable: args.stable.unwrap_or_else(newest_pinned_minor),
        title: args.title.clone(),
        content_types,
    };
    let verdict = verify_layout(&layout, &inputs);
    print!("{}", verdict_text(&verdict));
    if !verdict.passed() {
        std::process::exit(1);
    }
    Ok(())
}

/// The conformance list of `release` from the installed toolchain's `e2e.test`.
async fn toolchain_list(release: &str) -> Result<Vec<certification::ConformanceTest>> {
    let missing = |e: toolchain::ToolchainError| {
        anyhow::anyhow!(
            "no conformance list for {release}: {e}; install the toolchain (harness toolchain install --kubernetes {release}) \
             or pass --conformance-list FILE (e2e.test --list-conformance-tests of that release)"
        )
    };
    let pinned = toolchain::resolve(Some(release)).map_err(missing)?;
    let installed = toolchain::installed(&pinned).map_err(missing)?;
    conformance_list(&installed.binary("e2e.test")).await.map_err(|e| anyhow::anyhow!(e))
}

/// The content type each URL field of the submission's PRODUCT.yaml answers a GET with.
async fn fetch_content_types(layout: &Layout) -> BTreeMap<String, String> {
    let mut types = BTreeMap::new();
    let Some(text) = layout.file("PRODUCT.yaml").and_then(|file| std::fs::read_to_string(file).ok()) else {
        return types;
    };
    let Ok(fields) = serde_yaml_ng::from_str::<BTreeMap<String, serde_yaml_ng::Value>>(&text) else { return types };
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("a plain client builds");
    for field in certification::product::URL_FIELDS {
        let Some(url) = fields.get(field).and_then(|v| v.as_str()) else { continue };
        let answer = match client.get(url).send().await {
            Ok(response) => response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| format!("none (HTTP {})", response.status()), str::to_owned),
            Err(e) => format!("none ({e})"),
        };
        types.insert(field.to_owned(), answer);
    }
    types
}
