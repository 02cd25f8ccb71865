//! `upstream-load-balancers`: upstream's own load-balancer tests (`[Feature:LoadBalancer]` of the
//! release's `e2e.test`), each run or skipped by the capabilities the provider declares.
//!
//! Upstream dropped its per-provider gating of these tests (kubernetes/kubernetes#124660): whoever
//! runs them keeps a skip list by hand. Here the skips are derived. `data/upstream-load-balancers.yaml`
//! maps each test to the capabilities it needs; the suite lists the release's tests
//! (`e2e.test --list-tests`), and [`plan`] decides each one:
//! - mapped, and the provider declares every capability it needs: run;
//! - mapped, and a capability is missing: skipped, the JUnit case saying which and the provider's
//!   `unsupported:` reason;
//! - not in the table (a test upstream added): run all the same, and reported as unmapped (the
//!   summary, and a property on its JUnit case), never skipped unseen.
//!
//! The tests to run go to [`GinkgoSuite`] as an exact focus, `--provider=skeleton` as for every
//! external provider, through the provider's `run_on_cloud_network` hook when it has one: the tests
//! dial load balancers, health-check ports and nodes from the test process, which must be a client
//! on the cloud's network (on the `local` provider's real nodes, the hub's). Then the suite rewrites
//! the JUnit `e2e.test` wrote to the load-balancer tests alone (it lists every spec of the binary,
//! thousands of them skipped), each skip with its reason, into `junit_upstream-load-balancers.xml`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::Deserialize;

use super::exec;
use super::ginkgo::{Binaries, GinkgoSuite, given_or_toolchain};
use super::{SuiteContext, SuiteError, SuiteOutcome, SuiteRunner};
use config::template::Vars;
use config::{Capability, CommandSpec, Provider};
use junit::{Attempt, Detail, Outcome, Output, Property, ReadOptions, Report, Status, TestCase};
use k8s_openapi::api::core::v1::Node;

/// The label upstream's load-balancer tests carry.
pub const LABEL: &str = "[Feature:LoadBalancer]";
const TABLE_DATA: &str = include_str!("data/upstream-load-balancers.yaml");
/// The JUnit property on a test the table does not map.
pub const UNMAPPED_PROPERTY: &str = "unmapped";
/// The JUnit property naming the capability a skipped test lacks.
pub const CAPABILITY_PROPERTY: &str = "capability";

/// The table: which capabilities each upstream load-balancer test needs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    /// The releases whose test lists the table was compared with.
    pub checked: Vec<String>,
    pub tests: Vec<Row>,
}

/// One upstream test.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// The test's name without its bracketed tags ([`key`]).
    pub test: String,
    /// Capability names (providers.yaml), most basic first: a skip names the first one missing.
    pub needs: Vec<String>,
    /// What the test checks, in a line.
    pub checks: String,
}

impl Row {
    /// The capabilities it needs (names checked by a unit test).
    pub fn capabilities(&self) -> Vec<Capability> {
        self.needs
            .iter()
            .map(|name| name.parse().unwrap_or_else(|()| panic!("{}: unknown capability {name}", self.test)))
            .collect()
    }
}

/// The bundled table.
pub fn table() -> Table {
    serde_yaml_ng::from_str(TABLE_DATA)
        .unwrap_or_else(|e| panic!("data/upstream-load-balancers.yaml parses (checked by a unit test): {e}"))
}

/// A test's key in the table: its name without its bracketed tags ([`junit::untagged_name`]).
pub fn key(name: &str) -> String {
    junit::untagged_name(name)
}

/// The load-balancer tests of `e2e.test --list-tests` output (`    <file>:<line>: <name>` a line).
pub fn listed_tests(list_output: &str) -> Vec<String> {
    let mut names: Vec<String> = list_output
        .lines()
        .filter_map(|line| line.trim().split_once(": ").map(|(_, name)| name.trim().to_owned()))
        .filter(|name| name.contains(LABEL))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// What the suite does with one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Mapped, and the provider declares everything it needs.
    Run,
    /// Not in the table: run, and reported.
    RunUnmapped,
    /// Mapped, and the provider lacks `capability`.
    Skip { capability: Capability, reason: String },
    /// Left out by the suite's own `skip` (a suite of kind `upstream-load-balancers` in providers.yaml).
    Excluded { skip: String },
}

impl Decision {
    /// Whether the test runs.
    pub fn runs(&self) -> bool {
        matches!(self, Decision::Run | Decision::RunUnmapped)
    }
}

/// One test of the release's list and what to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Its name as `e2e.test` lists it (and ginkgo's focus matches it).
    pub name: String,
    pub decision: Decision,
}

/// Decides each listed test for a provider declaring `capabilities`, leaving out what `skip`
/// matches.
pub fn plan(
    listed: &[String],
    table: &Table,
    capabilities: &BTreeSet<Capability>,
    unsupported: &BTreeMap<Capability, String>,
    skip: Option<&regex::Regex>,
) -> Vec<Planned> {
    let rows: BTreeMap<String, &Row> = table.tests.iter().map(|row| (key(&row.test), row)).collect();
    listed
        .iter()
        .map(|name| {
            let decision = match rows.get(&key(name)) {
                _ if skip.is_some_and(|skip| skip.is_match(name)) => {
                    Decision::Excluded { skip: skip.map(|s| s.as_str().to_owned()).unwrap_or_default() }
                }
                None => Decision::RunUnmapped,
                Some(row) => match row.capabilities().into_iter().find(|c| !capabilities.contains(c)) {
                    None => Decision::Run,
                    Some(capability) => {
                        Decision::Skip { capability, reason: super::missing_capability(capability, unsupported) }
                    }
                },
            };
            Planned { name: name.clone(), decision }
        })
        .collect()
}

/// The built-in suite for one provider.
#[derive(Debug, Clone)]
pub struct UpstreamLoadBalancersSuite {
    name: String,
    parallel: u16,
    skip: Option<regex::Regex>,
    capabilities: BTreeSet<Capability>,
    unsupported: BTreeMap<Capability, String>,
    /// The provider's `run_on_cloud_network` hook.
    on_cloud_network: Option<CommandSpec>,
    vars: Vars,
    binaries: Option<Binaries>,
    /// ginkgo's `--flake-attempts` (the suite's `flake_attempts`).
    flake_attempts: u32,
}

impl UpstreamLoadBalancersSuite {
    /// `vars` fill in the placeholders of the provider's `run_on_cloud_network` hook.
    pub fn new(name: &str, parallel: u16, provider: &Provider, vars: Vars) -> Self {
        UpstreamLoadBalancersSuite {
            name: name.to_owned(),
            parallel,
            skip: None,
            capabilities: provider.capabilities.clone(),
            unsupported: provider.unsupported.clone(),
            on_cloud_network: provider.hooks.run_on_cloud_network.as_ref().map(|hook| hook.command.clone()),
            vars,
            binaries: None,
            flake_attempts: 1,
        }
    }

    /// Runs a failing test up to `attempts` times in all; a pass after a failure is flaky.
    pub fn with_flake_attempts(mut self, attempts: u32) -> Self {
        self.flake_attempts = attempts.max(1);
        self
    }

    /// Leaves out the tests `skip` matches (a suite's own `skip`), reporting each as skipped.
    pub fn with_skip(mut self, skip: Option<&str>) -> Result<Self, SuiteError> {
        self.skip = skip
            .map(regex::Regex::new)
            .transpose()
            .map_err(|e| exec::cannot_run(&self.name, format!("skip is not a regular expression: {e}")))?;
        Ok(self)
    }

    /// Runs these programs instead of the toolchain's (tests).
    pub fn with_binaries(mut self, binaries: Binaries) -> Self {
        self.binaries = Some(binaries);
        self
    }

    fn junit_file(&self, ctx: &SuiteContext) -> PathBuf {
        ctx.artifacts.join(format!("junit_{}.xml", self.name))
    }
}

#[async_trait]
impl SuiteRunner for UpstreamLoadBalancersSuite {
    fn name(&self) -> &str {
        &self.name
    }

    async fn run(&self, ctx: &SuiteContext) -> Result<SuiteOutcome, SuiteError> {
        let binaries = given_or_toolchain(self.binaries.as_ref(), &self.name, ctx)?;
        let listed = list_tests(&binaries.e2e_test).await.map_err(|e| exec::cannot_run(&self.name, e))?;
        if listed.is_empty() {
            return Err(exec::cannot_run(
                &self.name,
                format!("{} lists no {LABEL} test: is it upstream's e2e.test?", binaries.e2e_test.display()),
            ));
        }
        let planned = plan(&listed, &table(), &self.capabilities, &self.unsupported, self.skip.as_ref());
        let to_run: Vec<&str> = planned.iter().filter(|p| p.decision.runs()).map(|p| p.name.as_str()).collect();
        tracing::info!("suite {}: {} of {} upstream load-balancer tests to run", self.name, to_run.len(), listed.len());

        let ran = match config::quick::exactly(&to_run) {
            None => None,
            Some(focus) => {
                let wrapper = self.wrapper()?;
                let nodes = schedulable_node_count(&binaries.kubectl, &ctx.kubeconfig)
                    .await
                    .map_err(|e| exec::cannot_run(&self.name, e))?;
                // Every provider is an external one to these tests (the last --provider wins).
                // e2e.test counts the schedulable nodes in ginkgo's first process only
                // (test/e2e/e2e.go), so without --num-nodes a test needing two nodes run in another
                // process skips itself ("Requires at least 2 nodes (not -1)"); kubetest passes it too.
                let args = vec!["--provider=skeleton".to_owned(), format!("--num-nodes={nodes}")];
                let ginkgo = GinkgoSuite::new(&self.name, Some(focus), None, self.parallel, args)
                    .with_binaries(binaries)
                    .with_wrapper(wrapper)
                    .with_flake_attempts(self.flake_attempts);
                let scratch = ctx.artifacts.join(format!("{}-e2e", self.name));
                std::fs::create_dir_all(&scratch).map_err(exec::write_error(&self.name, &scratch))?;
                let inner = SuiteContext { artifacts: scratch.clone(), ..ctx.clone() };
                let outcome = ginkgo.run(&inner).await?;
                Some((outcome, scratch))
            }
        };
        let ran_report = match &ran {
            Some((outcome, _)) => Some(read_reports(&self.name, &outcome.junit)?),
            None => None,
        };
        let report = suite_report(&self.name, &planned, ran_report.as_ref());
        std::fs::create_dir_all(&ctx.artifacts).map_err(exec::write_error(&self.name, &ctx.artifacts))?;
        let file = self.junit_file(ctx);
        junit::write_file(&report, &file).map_err(exec::write_error(&self.name, &file))?;
        if let Some((_, scratch)) = &ran {
            // Keep e2e.test's own files (its output, its full report) out of TestGrid's `junit_*` glob.
            rename_junit(scratch).map_err(exec::write_error(&self.name, scratch))?;
        }
        Ok(outcome(&self.name, &planned, &report, ran.map(|(outcome, _)| outcome), file))
    }
}

impl UpstreamLoadBalancersSuite {
    /// The `run_on_cloud_network` command line, rendered.
    fn wrapper(&self) -> Result<Vec<String>, SuiteError> {
        let Some(command) = &self.on_cloud_network else { return Ok(Vec::new()) };
        let (argv, _) = command
            .render(&self.vars)
            .map_err(|e| exec::cannot_run(&self.name, format!("hooks.run_on_cloud_network: {e}")))?;
        Ok(argv)
    }
}

/// The nodes e2e.test counts as ready and schedulable (its `GetReadySchedulableNodes`): not
/// cordoned, `Ready`, `NetworkUnavailable` absent or `False`, and no `NoSchedule` or `NoExecute`
/// taint.
pub fn schedulable_nodes(nodes: &[Node]) -> usize {
    let condition = |node: &Node, kind: &str| {
        let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
        conditions.into_iter().flatten().find(|c| c.type_ == kind).map(|c| c.status.clone())
    };
    nodes
        .iter()
        .filter(|node| node.spec.as_ref().and_then(|s| s.unschedulable) != Some(true))
        .filter(|node| condition(node, "Ready").as_deref() == Some("True"))
        .filter(|node| matches!(condition(node, "NetworkUnavailable").as_deref(), None | Some("False")))
        .filter(|node| {
            let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
            !taints.into_iter().flatten().any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        })
        .count()
}

/// [`schedulable_nodes`] of the cluster, read with `kubectl get nodes`.
async fn schedulable_node_count(kubectl: &Path, kubeconfig: &Path) -> Result<usize, String> {
    let output = tokio::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "nodes", "-o", "json"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e}", kubectl.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("counting the nodes (kubectl get nodes): {}", stderr.trim()));
    }
    // kubectl prints a `kind: List`, not a `NodeList`: only its items are read.
    #[derive(Deserialize)]
    struct Listed {
        items: Vec<Node>,
    }
    let listed: Listed = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("counting the nodes: kubectl get nodes -o json printed no node list: {e}"))?;
    Ok(schedulable_nodes(&listed.items))
}

/// The release's load-balancer tests, from `e2e.test --list-tests`.
pub async fn list_tests(e2e_test: &Path) -> Result<Vec<String>, String> {
    Ok(listed_tests(&exec::e2e_test_list(e2e_test, "--list-tests").await?))
}

fn read_reports(suite: &str, files: &[PathBuf]) -> Result<Vec<Report>, SuiteError> {
    files
        .iter()
        .map(|file| {
            junit::read_file(file, &ReadOptions::default())
                .map_err(|e| exec::cannot_run(suite, format!("reading {}: {e}", file.display())))
        })
        .collect()
}

/// The suite's JUnit: every listed test once (as ginkgo reported it, or skipped with its reason),
/// and whatever else failed in e2e.test's reports (a suite-level node, the harness's own case for
/// a crash or a timeout).
pub fn suite_report(suite: &str, planned: &[Planned], ran: Option<&Vec<Report>>) -> Report {
    let cases: Vec<&TestCase> = ran.into_iter().flatten().flat_map(|r| r.cases().map(|(_, case)| case)).collect();
    let by_spec: BTreeMap<&str, &TestCase> =
        cases.iter().map(|case| (case.name.strip_prefix("[It] ").unwrap_or(&case.name), *case)).collect();
    let mut out = Vec::new();
    for test in planned {
        let case = match &test.decision {
            Decision::Skip { capability, reason } => skipped_case(&test.name, Some(*capability), reason),
            Decision::Excluded { skip } => skipped_case(
                &test.name,
                None,
                &format!("left out by the suite's skip {skip:?} (providers.yaml suites)"),
            ),
            Decision::Run | Decision::RunUnmapped => {
                let mut case = match by_spec.get(test.name.as_str()) {
                    Some(case) => (*case).clone(),
                    None => not_reported_case(&test.name),
                };
                if test.decision == Decision::RunUnmapped {
                    case.properties.push(Property { name: UNMAPPED_PROPERTY.into(), value: unmapped_note() });
                }
                case
            }
        };
        out.push(case);
    }
    // What else failed: ginkgo's suite-level nodes, or the harness's case for the whole run.
    let listed: BTreeSet<&str> = planned.iter().map(|p| p.name.as_str()).collect();
    for case in cases {
        let spec = case.name.strip_prefix("[It] ").unwrap_or(&case.name);
        if !listed.contains(spec) && matches!(case.status(), Status::Failed | Status::Error) {
            out.push(case.clone());
        }
    }
    Report {
        name: Some(suite.to_owned()),
        suites: vec![junit::Suite {
            name: suite.to_owned(),
            timestamp: None,
            time: None,
            properties: Vec::new(),
            cases: out,
            system_out: None,
            system_err: None,
        }],
    }
}

fn unmapped_note() -> String {
    "not in harness/src/suites/data/upstream-load-balancers.yaml: run by default; add it with the capabilities it needs"
        .into()
}

fn skipped_case(name: &str, capability: Option<Capability>, reason: &str) -> TestCase {
    let attempt = Attempt {
        outcome: Outcome::Skipped,
        time: Some(0.0),
        timestamp: None,
        detail: Some(Detail { message: Some(reason.to_owned()), kind: None, text: Output::new(String::new()) }),
        system_out: None,
        system_err: None,
    };
    TestCase {
        name: format!("[It] {name}"),
        classname: None,
        properties: capability
            .map(|capability| Property { name: CAPABILITY_PROPERTY.into(), value: capability.to_string() })
            .into_iter()
            .collect(),
        attempts: vec![attempt],
    }
}

/// A test that was to run but is in no report: e2e.test stopped before it (a crash, a timeout).
fn not_reported_case(name: &str) -> TestCase {
    let message = "e2e.test reported nothing for this test: it stopped before it (see the suite's other cases)";
    let attempt = Attempt {
        outcome: Outcome::Failed,
        time: None,
        timestamp: None,
        detail: Some(Detail { message: Some(message.into()), kind: None, text: Output::new(String::new()) }),
        system_out: None,
        system_err: None,
    };
    TestCase { name: format!("[It] {name}"), classname: None, properties: Vec::new(), attempts: vec![attempt] }
}

/// Renames e2e.test's `junit_*.xml` in `dir` to `e2e-junit_*.xml`: the suite's own file stands for it.
fn rename_junit(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("junit") && name.ends_with(".xml") {
            std::fs::rename(entry.path(), dir.join(format!("e2e-{name}")))?;
        }
    }
    Ok(())
}

fn outcome(
    suite: &str,
    planned: &[Planned],
    report: &Report,
    ran: Option<SuiteOutcome>,
    file: PathBuf,
) -> SuiteOutcome {
    let counts = report.counts();
    let skipped = planned.iter().filter(|p| matches!(p.decision, Decision::Skip { .. })).count();
    let excluded = planned.iter().filter(|p| matches!(p.decision, Decision::Excluded { .. })).count();
    let unmapped: Vec<&str> =
        planned.iter().filter(|p| p.decision == Decision::RunUnmapped).map(|p| p.name.as_str()).collect();
    let failed = counts.failed + counts.errors;
    let mut summary = format!(
        "{} of {} upstream load-balancer tests passed, {failed} failed, {skipped} skipped for capabilities the provider lacks",
        counts.passed + counts.flaky,
        planned.len()
    );
    if counts.flaky > 0 {
        summary.push_str(&format!(" ({} of them flaky: failed, then passed on a retry)", counts.flaky));
    }
    if excluded > 0 {
        summary.push_str(&format!(", {excluded} left out by the suite's skip"));
    }
    if !unmapped.is_empty() {
        summary.push_str(&format!(
            "; {} unmapped (ran; add to data/upstream-load-balancers.yaml): {}",
            unmapped.len(),
            unmapped.join(" | ")
        ));
    }
    let passed = failed == 0 && ran.as_ref().is_none_or(|o| o.passed);
    if let Some(ran) = ran.filter(|o| !o.passed && failed == 0) {
        summary.push_str(&format!("; e2e.test: {}", ran.summary));
    }
    tracing::info!("suite {suite}: {summary}");
    SuiteOutcome { passed, junit: vec![file], summary }
}

#[cfg(test)]
mod tests;
