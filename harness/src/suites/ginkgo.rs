//! `ginkgo` suites: upstream's `e2e.test` of the cluster's Kubernetes version, from the toolchain.
//!
//! As kubetest2's ginkgo tester does, with `parallel` > 1 it runs through the `ginkgo` CLI,
//! `ginkgo --nodes=N [...] e2e.test -- <e2e flags>`; with 1 it runs `e2e.test <e2e flags>`
//! directly (no CLI in between: one process group, one output). The e2e flags are
//! `--kubeconfig`, `--kubectl-path` (the toolchain's kubectl, as kubetest2 passes its own),
//! `--provider` ([`e2e_provider`]), `--ginkgo.focus`, `--ginkgo.skip`, `--report-dir={artifacts}`,
//! `--ginkgo.timeout=<suite timeout>`, `--ginkgo.no-color`, `--ginkgo.silence-skips` (not in
//! kubetest2: without it ginkgo prints an `S` per skipped spec, thousands of them on one line of
//! the output, for nothing the JUnit does not say), `--ginkgo.flake-attempts=N` when the suite's
//! `flake_attempts` is above 1 (as cloud-provider-gcp's jobs pass `--ginkgo.flakeAttempts=3`),
//! then the suite's `args` (rendered with
//! the run's placeholders; Go's flag parsing lets the last of a repeated flag win, so `args` can
//! override any of ours, `--provider` included).
//!
//! ginkgo stops itself at the suite's timeout: it fails the spec it interrupted, runs its cleanup
//! nodes (each with ginkgo's grace period, 30 s, once past the deadline) and writes its report.
//! e2e.test's report of the timed-out spec (its progress report, its steps) is what a user needs,
//! so the harness gives ginkgo [`GINKGO_CLEANUP_GRACE`] past the limit to finish on its own. Only
//! then does it step in, as a person at the terminal would: an interrupt to the process group,
//! and a second one a second later, which is ginkgo's "skip the cleanup, only report" level; then
//! [`GINKGO_REPORT_GRACE`] to write the report, then SIGKILL. It reports `timed out after
//! <timeout>`. At most limit + [`GINKGO_CLEANUP_GRACE`] + 1 s + [`GINKGO_REPORT_GRACE`] in all.
//!
//! The outcome comes from the JUnit `e2e.test` writes into the artifacts (`junit_01.xml`, one case
//! per spec, `[It] <spec>`, skipped ones included, and a case per suite-level node such as
//! `[SynchronizedBeforeSuite]`, which the summary's counts include): passed when no case failed
//! and ginkgo exited 0. When an
//! earlier suite of the run already left a `junit_01.xml` there, this one runs with
//! `--report-prefix=<suite>_` (`junit_<suite>_01.xml`) rather than overwrite it. When `e2e.test`
//! wrote no JUnit (it crashed, or could not reach the cluster before its suite started), the
//! harness writes `junit_<suite>.xml` with a failing case carrying the tail of its output, as for
//! [`super::exec`]. Output goes to `<artifacts>/<suite>-output.txt`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use nix::sys::signal::Signal;

use super::exec::{self, Invocation, JunitSnapshot, absolute};
use super::{SuiteContext, SuiteError, SuiteOutcome, SuiteRunner};
use config::template::{self, TemplateError, Vars};
use toolchain::{self, Toolchain};

/// The `--provider` values `e2e.test` knows (v1.36, v1.37: `e2e.test --provider=x` names them when
/// `x` is not one). `local` and `skeleton` are the no-cloud provider; the others turn on that
/// cloud's provider code in e2e and usually want their own flags (`--gce-project`, ...), given
/// through the suite's `args`.
pub const E2E_PROVIDERS: &[&str] = &["aws", "azure", "gce", "kubemark", "local", "openstack", "skeleton", "vsphere"];

/// How long past the suite's timeout ginkgo has to clean up and report on its own before the
/// harness interrupts it: three of ginkgo's 30 s grace periods (the interrupted spec, its
/// `AfterEach`, the namespace teardown of the e2e framework) on a loaded machine.
pub const GINKGO_CLEANUP_GRACE: Duration = Duration::from_secs(90);
/// After the second interrupt (cleanup skipped), how long ginkgo has to write its report before
/// SIGKILL: its own grace period for the node it was in, and room to write.
pub const GINKGO_REPORT_GRACE: Duration = Duration::from_secs(45);

/// The `--provider` for `e2e.test`: the provider's own name when e2e knows it, else `skeleton`,
/// which is what external cloud providers' conformance jobs use.
pub fn e2e_provider(provider: &str) -> &str {
    if E2E_PROVIDERS.contains(&provider) { provider } else { "skeleton" }
}

/// The programs a ginkgo suite runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    pub e2e_test: PathBuf,
    pub ginkgo: PathBuf,
    pub kubectl: PathBuf,
}

impl Binaries {
    /// The toolchain's `e2e.test`, `ginkgo` and `kubectl`.
    pub fn of(toolchain: &Toolchain) -> Self {
        Binaries {
            e2e_test: toolchain.binary("e2e.test"),
            ginkgo: toolchain.binary("ginkgo"),
            kubectl: toolchain.binary("kubectl"),
        }
    }
}

/// A `ginkgo` suite of `providers.yaml` (the built-in `conformance` and `conformance-quick` too).
#[derive(Debug, Clone)]
pub struct GinkgoSuite {
    name: String,
    focus: Option<String>,
    skip: Option<String>,
    parallel: u16,
    args: Vec<String>,
    binaries: Option<Binaries>,
    /// A command the whole command line is appended to (a provider's `run_on_cloud_network`).
    wrapper: Vec<String>,
    /// ginkgo's `--flake-attempts` (the suite's `flake_attempts`): 1 runs each spec once.
    flake_attempts: u32,
}

impl GinkgoSuite {
    pub fn new(
        name: impl Into<String>,
        focus: Option<String>,
        skip: Option<String>,
        parallel: u16,
        args: Vec<String>,
    ) -> Self {
        GinkgoSuite {
            name: name.into(),
            focus,
            skip,
            parallel,
            args,
            binaries: None,
            wrapper: Vec::new(),
            flake_attempts: 1,
        }
    }

    /// Runs a failing spec up to `attempts` times in all (ginkgo's `--flake-attempts`); e2e.test's
    /// JUnit then says `Attempt #N Failed.  Retrying` in a spec that passed later, which reads as
    /// flaky.
    pub fn with_flake_attempts(mut self, attempts: u32) -> Self {
        self.flake_attempts = attempts.max(1);
        self
    }

    /// Runs the command line as the arguments of `wrapper` (e.g. `harness cluster exec --name C
    /// --`, which runs it as a client on the cloud's network); empty for none.
    pub fn with_wrapper(mut self, wrapper: Vec<String>) -> Self {
        self.wrapper = wrapper;
        self
    }

    /// Runs these programs instead of the toolchain's for the context's Kubernetes version (a
    /// provider's own `e2e.test` build, or tests).
    pub fn with_binaries(mut self, binaries: Binaries) -> Self {
        self.binaries = Some(binaries);
        self
    }

    /// The programs it runs for `ctx`: the ones given, else the installed toolchain's.
    pub fn binaries(&self, ctx: &SuiteContext) -> Result<Binaries, SuiteError> {
        given_or_toolchain(self.binaries.as_ref(), &self.name, ctx)
    }

    /// The command line for `ctx`; `report_prefix` is `e2e.test`'s `--report-prefix`.
    pub fn argv(
        &self,
        ctx: &SuiteContext,
        binaries: &Binaries,
        report_prefix: Option<&str>,
    ) -> Result<Vec<String>, TemplateError> {
        let vars: Vars = exec::suite_vars(ctx);
        let timeout = go_duration(ctx.timeout);
        let mut flags = vec![
            format!("--kubeconfig={}", absolute(&ctx.kubeconfig).display()),
            format!("--kubectl-path={}", binaries.kubectl.display()),
            format!("--provider={}", e2e_provider(&ctx.provider)),
        ];
        if let Some(focus) = &self.focus {
            flags.push(format!("--ginkgo.focus={focus}"));
        }
        if let Some(skip) = &self.skip {
            flags.push(format!("--ginkgo.skip={skip}"));
        }
        flags.push(format!("--report-dir={}", absolute(&ctx.artifacts).display()));
        if let Some(prefix) = report_prefix {
            flags.push(format!("--report-prefix={prefix}"));
        }
        flags.push(format!("--ginkgo.timeout={timeout}"));
        flags.push("--ginkgo.no-color".into());
        flags.push("--ginkgo.silence-skips".into());
        if self.flake_attempts > 1 {
            flags.push(format!("--ginkgo.flake-attempts={}", self.flake_attempts));
        }
        for arg in &self.args {
            flags.push(template::render(arg, &vars)?);
        }
        if self.parallel <= 1 {
            let e2e_test = binaries.e2e_test.display().to_string();
            return Ok(self.wrapper.iter().cloned().chain(std::iter::once(e2e_test)).chain(flags).collect());
        }
        // The CLI's own suite timeout (default 1h) and colours, then the e2e flags after `--`.
        let mut argv = self.wrapper.clone();
        argv.extend([
            binaries.ginkgo.display().to_string(),
            format!("--nodes={}", self.parallel),
            format!("--timeout={timeout}"),
            "--no-color".into(),
            binaries.e2e_test.display().to_string(),
            "--".into(),
        ]);
        argv.extend(flags);
        Ok(argv)
    }
}

/// `given` programs, else the installed toolchain's for the context's Kubernetes version.
pub(crate) fn given_or_toolchain(
    given: Option<&Binaries>,
    suite: &str,
    ctx: &SuiteContext,
) -> Result<Binaries, SuiteError> {
    match given {
        Some(binaries) => Ok(binaries.clone()),
        None => toolchain_binaries(suite, ctx),
    }
}

/// The installed toolchain's programs for the context's Kubernetes version.
pub(crate) fn toolchain_binaries(suite: &str, ctx: &SuiteContext) -> Result<Binaries, SuiteError> {
    let cannot_run = |e: toolchain::ToolchainError| exec::cannot_run(suite, format!("e2e.test: {e}"));
    let release = toolchain::resolve(Some(&ctx.kubernetes_version)).map_err(cannot_run)?;
    Ok(Binaries::of(&toolchain::installed(&release).map_err(cannot_run)?))
}

/// A Go `time.Duration` string (`90s`, `1500ms`) for ginkgo's flags.
pub fn go_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// `--report-prefix` for a suite whose artifacts may already hold an earlier suite's `junit_01.xml`.
fn report_prefix(artifacts: &Path, suite: &str) -> Option<String> {
    artifacts.join("junit_01.xml").exists().then(|| format!("{suite}_"))
}

#[async_trait]
impl SuiteRunner for GinkgoSuite {
    fn name(&self) -> &str {
        &self.name
    }

    async fn run(&self, ctx: &SuiteContext) -> Result<SuiteOutcome, SuiteError> {
        let binaries = self.binaries(ctx)?;
        let program = if self.parallel <= 1 { &binaries.e2e_test } else { &binaries.ginkgo };
        if !program.is_file() {
            return Err(exec::cannot_run(&self.name, format!("{} does not exist", program.display())));
        }
        let prefix = report_prefix(&ctx.artifacts, &self.name);
        let argv = self
            .argv(ctx, &binaries, prefix.as_deref())
            .map_err(|e| exec::cannot_run(&self.name, format!("args: {e}")))?;
        let invocation = Invocation {
            argv,
            env: Vec::new(),
            cwd: None,
            output: None,
            timeout: ctx.timeout.saturating_add(GINKGO_CLEANUP_GRACE),
            // Two interrupts, a second apart (signals sent at once would merge into one).
            stop: vec![(Signal::SIGINT, Duration::from_secs(1)), (Signal::SIGINT, GINKGO_REPORT_GRACE)],
        };
        tracing::info!("suite {}: {}", self.name, invocation.argv.join(" "));
        let before = JunitSnapshot::take(&ctx.artifacts);
        let mut finished = exec::run_captured(&self.name, ctx, &invocation).await?;
        if let exec::End::TimedOut { limit } = &mut finished.end {
            // Report the suite's limit, not the harness's grace on top of it.
            *limit = ctx.timeout;
        }
        exec::conclude(&self.name, ctx, &before, &finished)
    }
}

#[cfg(test)]
mod tests;
