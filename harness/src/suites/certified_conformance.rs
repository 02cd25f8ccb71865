//! The `certified-conformance` suite: upstream conformance run as certification takes it, and the
//! `cncf/k8s-conformance` submission of the provider's product written from it.
//!
//! The run mirrors the conformance image's go-runner (what Sonobuoy and Hydrophone start):
//! `ginkgo --procs=N --focus=\[Conformance\] --no-color --timeout=<suite timeout> -v e2e.test --
//! --disable-log-dump --provider=skeleton --report-dir=<submission> --kubeconfig=<kubeconfig>`
//! plus `--kubectl-path` (the image has kubectl on its PATH; here it is the toolchain's). Nothing
//! is skipped: no `--skip`, no label filter, not the image's parallel mode (which adds a
//! `[Serial]` skip); with `--procs`, ginkgo runs the serial specs last, on one process, as
//! Hydrophone's `--parallel` does. `-v` makes the output carry `e2e test version: vX.Y.Z`, which
//! the submission checks look for. The output goes straight to `e2e.log` and `e2e.test` writes
//! `junit_01.xml` into the submission folder, so each exists once in the artifacts (TestGrid
//! reads that junit like any other).
//!
//! Then the harness writes `PRODUCT.yaml` (the provider's `certification:` block, its
//! placeholders filled in) and `README.md` (how to recreate the cluster and rerun the tests), and
//! applies every submission check ([`certification::verify`]) against the release's conformance
//! list, which `e2e.test --list-conformance-tests` prints (read before the tests start, so a list
//! the checks cannot read stops the suite at once rather than after the run). Each check is a test case of
//! `junit_certification.xml`; the suite passes only when the tests passed and every check did.
//!
//! The submission is `<artifacts>/k8s-conformance/vX.Y/<product>/`: copied to the same path in a
//! fork of `cncf/k8s-conformance`, it is the pull request.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use certification::{Inputs, Minor, Outcome as CheckOutcome, Product, Reproduction, Verdict};
use junit::{Attempt, Detail, Outcome, Output, Report, Suite, TestCase};
use nix::sys::signal::Signal;

use super::exec::{self, Invocation, JunitSnapshot, absolute};
use super::ginkgo::{Binaries, GINKGO_CLEANUP_GRACE, GINKGO_REPORT_GRACE, given_or_toolchain, go_duration};
use super::{SuiteContext, SuiteError, SuiteOutcome, SuiteRunner};
use config::CONFORMANCE_FOCUS;

/// The folder of the artifacts the submission goes in, named after the repository it is for.
pub const SUBMISSIONS_DIR: &str = "k8s-conformance";
/// The JUnit of the submission checks, a case per check.
pub const CHECKS_JUNIT: &str = "junit_certification.xml";
/// The checks' output, as `harness conformance verify` prints it.
pub const CHECKS_TEXT: &str = "certification-checks.txt";

/// What the README says besides the test command (the run knows it; the suite does not).
#[derive(Debug, Clone)]
pub struct About {
    pub tool: String,
    pub cluster: Vec<String>,
    pub components: Vec<(String, String)>,
    pub configuration: String,
    pub steps: Vec<(String, String)>,
}

/// The built-in `certified-conformance` suite of one provider's product.
#[derive(Debug, Clone)]
pub struct CertifiedConformanceSuite {
    name: String,
    parallel: u16,
    product: Product,
    about: About,
    /// The current stable Kubernetes minor, for the supported-release check.
    stable: Minor,
    binaries: Option<Binaries>,
}

impl CertifiedConformanceSuite {
    pub fn new(name: impl Into<String>, parallel: u16, product: Product, about: About, stable: Minor) -> Self {
        CertifiedConformanceSuite { name: name.into(), parallel, product, about, stable, binaries: None }
    }

    /// Runs these programs instead of the toolchain's (tests).
    pub fn with_binaries(mut self, binaries: Binaries) -> Self {
        self.binaries = Some(binaries);
        self
    }

    /// The submission folder for `ctx`.
    pub fn submission_dir(&self, ctx: &SuiteContext) -> Result<PathBuf, SuiteError> {
        let release = release_of(&self.name, ctx)?;
        Ok(certification::submission_dir(&absolute(&ctx.artifacts).join(SUBMISSIONS_DIR), release, &self.product))
    }

    /// The command line (go-runner's, see the module doc).
    pub fn argv(&self, ctx: &SuiteContext, binaries: &Binaries, report_dir: &Path) -> Vec<String> {
        vec![
            binaries.ginkgo.display().to_string(),
            format!("--procs={}", self.parallel.max(1)),
            format!("--focus={CONFORMANCE_FOCUS}"),
            "--no-color".into(),
            format!("--timeout={}", go_duration(ctx.timeout)),
            "-v".into(),
            binaries.e2e_test.display().to_string(),
            "--".into(),
            "--disable-log-dump".into(),
            "--provider=skeleton".into(),
            format!("--report-dir={}", report_dir.display()),
            format!("--kubeconfig={}", absolute(&ctx.kubeconfig).display()),
            format!("--kubectl-path={}", binaries.kubectl.display()),
        ]
    }
}

fn release_of(suite: &str, ctx: &SuiteContext) -> Result<Minor, SuiteError> {
    ctx.kubernetes_version.parse().map_err(|e| exec::cannot_run(suite, format!("Kubernetes version: {e}")))
}

#[async_trait]
impl SuiteRunner for CertifiedConformanceSuite {
    fn name(&self) -> &str {
        &self.name
    }

    async fn run(&self, ctx: &SuiteContext) -> Result<SuiteOutcome, SuiteError> {
        let binaries = given_or_toolchain(self.binaries.as_ref(), &self.name, ctx)?;
        for program in [&binaries.ginkgo, &binaries.e2e_test] {
            if !program.is_file() {
                return Err(exec::cannot_run(&self.name, format!("{} does not exist", program.display())));
            }
        }
        // Read before the hour of tests, so that a list the checks cannot use stops the suite at once.
        let list = conformance_list(&binaries.e2e_test).await.map_err(|e| exec::cannot_run(&self.name, e))?;
        let dir = self.submission_dir(ctx)?;
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(exec::write_error(&self.name, &dir))?;
        }
        fs::create_dir_all(&dir).map_err(exec::write_error(&self.name, &dir))?;

        let argv = self.argv(ctx, &binaries, &dir);
        let invocation = Invocation {
            argv: argv.clone(),
            env: Vec::new(),
            cwd: None,
            output: Some(dir.join("e2e.log")),
            timeout: ctx.timeout.saturating_add(GINKGO_CLEANUP_GRACE),
            stop: vec![(Signal::SIGINT, Duration::from_secs(1)), (Signal::SIGINT, GINKGO_REPORT_GRACE)],
        };
        tracing::info!("suite {}: {}", self.name, argv.join(" "));
        let before = JunitSnapshot::take(&ctx.artifacts);
        let mut finished = exec::run_captured(&self.name, ctx, &invocation).await?;
        if let exec::End::TimedOut { limit } = &mut finished.end {
            *limit = ctx.timeout;
        }
        let mut outcome = exec::conclude(&self.name, ctx, &before, &finished)?;

        self.write_product_and_readme(ctx, &dir, &argv)?;
        let inputs = Inputs { conformance_list: list, stable: self.stable, title: None, content_types: None };
        let verdict = certification::verify(&dir, &inputs).map_err(exec::write_error(&self.name, &dir))?;
        let checks_text = ctx.artifacts.join(CHECKS_TEXT);
        fs::write(&checks_text, verdict_text(&verdict)).map_err(exec::write_error(&self.name, &checks_text))?;
        let junit_file = ctx.artifacts.join(CHECKS_JUNIT);
        junit::write_file(&checks_report(&verdict), &junit_file).map_err(exec::write_error(&self.name, &junit_file))?;
        outcome.junit.push(junit_file);
        let failed = verdict.failures().count();
        if failed > 0 {
            outcome.passed = false;
            outcome.summary.push_str(&format!(
                "; the submission fails {failed} of {} checks ({CHECKS_TEXT})",
                verdict.checks.len()
            ));
        } else {
            outcome.summary.push_str(&format!("; submission {} passes every check", dir.display()));
        }
        Ok(outcome)
    }
}

impl CertifiedConformanceSuite {
    fn write_product_and_readme(&self, ctx: &SuiteContext, dir: &Path, argv: &[String]) -> Result<(), SuiteError> {
        let readme = Reproduction {
            product: self.product.clone(),
            kubernetes_version: ctx.kubernetes_version.clone(),
            tool: self.about.tool.clone(),
            cluster: self.about.cluster.clone(),
            components: self.about.components.clone(),
            configuration: self.about.configuration.clone(),
            steps: self.about.steps.clone(),
            test_command: shell_words(argv),
        };
        for (name, text) in [("PRODUCT.yaml", self.product.to_yaml()), ("README.md", readme.to_markdown())] {
            let file = dir.join(name);
            fs::write(&file, text).map_err(exec::write_error(&self.name, &file))?;
        }
        Ok(())
    }
}

/// The current stable Kubernetes minor as this harness knows it: the newest release it pins.
pub fn newest_pinned_minor() -> Minor {
    toolchain::default_release().version.parse().expect("the pinned releases are vMAJOR.MINOR.PATCH")
}

/// The release's conformance list, as its `e2e.test` prints it.
pub async fn conformance_list(e2e_test: &Path) -> Result<Vec<certification::ConformanceTest>, String> {
    let flag = "--list-conformance-tests";
    let listed = exec::e2e_test_list(e2e_test, flag).await?;
    certification::conformance_list::parse(&listed).map_err(|e| format!("{} {flag}: {e}", e2e_test.display()))
}

/// The checks as `harness conformance verify` prints them, a line each, then the title.
pub fn verdict_text(verdict: &Verdict) -> String {
    let mut text: String = verdict.checks.iter().map(|c| format!("{c}\n")).collect();
    let failed = verdict.failures().count();
    text.push_str(&format!(
        "{} of {} checks failed{}\n",
        failed,
        verdict.checks.len(),
        verdict.title().map(|t| format!("; pull request title: {t}")).unwrap_or_default()
    ));
    text
}

/// A test case per check: failed with its reason, skipped when it was not applied.
fn checks_report(verdict: &Verdict) -> Report {
    let cases = verdict
        .checks
        .iter()
        .map(|check| {
            let (outcome, detail) = match &check.outcome {
                CheckOutcome::Pass => (Outcome::Passed, None),
                CheckOutcome::Fail(reason) => (Outcome::Failed, Some(reason.clone())),
                CheckOutcome::NotChecked(why) => (Outcome::Skipped, Some(why.clone())),
            };
            let detail = detail.map(|text| Detail { message: Some(text.clone()), kind: None, text: Output::new(text) });
            let attempt = Attempt { outcome, detail, ..Attempt::default() };
            TestCase {
                name: format!("certification: {}", check.name),
                classname: None,
                properties: Vec::new(),
                attempts: vec![attempt],
            }
        })
        .collect();
    Report { name: None, suites: vec![Suite { name: "certification".into(), cases, ..Suite::default() }] }
}

/// `argv` as one shell command line, quoting what needs it.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|word| {
            if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_=./:,@+".contains(c)) {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
