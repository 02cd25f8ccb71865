//! cloud-e2e: the built-in, provider-agnostic tests of a cloud-controller-manager.
//!
//! Black-box: the tests talk only to the Kubernetes API, to the CCM's `/healthz`, and to the
//! provider's test hooks (`providers.yaml` `hooks`: terminate / shut down / start the instance of a
//! node, list the cloud's load balancers, dial a load balancer), and in the data-path tests to the
//! load balancers' ingress IPs. The provider's `capabilities` decide what runs; a test
//! whose capability or hook is missing is reported as skipped with the reason. Each test cleans up
//! what it made, and every wait is bounded and says what it awaited.
//!
//! The JUnit file is `junit_<suite>.xml` in `$ARTIFACTS`, one `<testsuite name="cloud-e2e">`, test
//! names in e2e style (`[cloud-e2e] [Feature:LoadBalancer] Service of type LoadBalancer should ...`),
//! written again as each test ends ([`progress`]): a run stopped midway keeps the results so far.
//! Tests that leave nodes alone run concurrently (each on its own service); those that disturb
//! every node or load balancer run after them, one at a time; last, the node-lifecycle tests
//! (shutdown, deletion), each on a worker of its own, at once when the cluster has a worker for
//! each away from the first (which the load-balancer tests use), else one after the other with
//! the deletion, which destroys an instance for good, the very last.

pub(crate) mod data_path;
mod health;
pub mod hooks;
mod lifecycle;
pub(crate) mod load_balancers;
mod nodes;
mod progress;
mod routes;
mod wait;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use super::{SuiteContext, SuiteError, SuiteOutcome, SuiteRunner};
use config::template::Placeholder;
use config::{Capability, Hooks, Provider};
pub use hooks::{HookKind, HookRunner};
use junit::{Attempt, Detail, Outcome, Output, Report, Suite, TestCase};

/// The `<testsuite>` name and the classname of every case.
pub const SUITE: &str = "cloud-e2e";
/// A test that runs longer than this is stopped and failed (its own waits are shorter).
const TEST_LIMIT: Duration = Duration::from_secs(10 * 60);
/// How many of the tests that leave nodes alone run at once.
const CONCURRENT_TESTS: usize = 16;

/// Why a test did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// What was expected and what was seen.
    Failed(String),
    /// Why it could not run here.
    Skipped(String),
}

impl From<kube::Error> for Verdict {
    fn from(error: kube::Error) -> Self {
        Verdict::Failed(format!("Kubernetes API: {error}"))
    }
}

/// Fails a test with `message`.
pub fn fail<T>(message: impl Into<String>) -> Result<T, Verdict> {
    Err(Verdict::Failed(message.into()))
}

pub type TestResult = Result<(), Verdict>;
pub type TestFn = for<'a> fn(&'a World) -> BoxFuture<'a, TestResult>;

/// What a test disturbs, which decides when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disturbs {
    /// Nothing other tests see: it runs concurrently with the other such tests.
    Nothing,
    /// Every node or load balancer (node labels, the backends of every load balancer): it runs
    /// alone, after those that disturb nothing.
    Everything,
    /// The machine of one worker, its own ([`lifecycle`]): these run last.
    OwnWorker,
}

/// One test: its name, what the provider must declare for it to run, and its body.
pub struct Test {
    pub name: &'static str,
    pub needs: &'static [Capability],
    pub hooks: &'static [HookKind],
    pub disturbs: Disturbs,
    pub run: TestFn,
}

impl Test {
    /// A test that leaves nodes alone (it runs concurrently) and calls no hook.
    pub fn new(name: &'static str, needs: &'static [Capability], run: TestFn) -> Test {
        Test { name, needs, hooks: &[], disturbs: Disturbs::Nothing, run }
    }

    /// It calls these provider hooks (a missing one makes it a skip).
    pub fn using(self, hooks: &'static [HookKind]) -> Test {
        Test { hooks, ..self }
    }

    /// It disturbs every node or load balancer: it runs alone, after the others.
    pub fn serial(self) -> Test {
        Test { disturbs: Disturbs::Everything, ..self }
    }

    /// It disturbs the machine of a worker of its own: it runs last.
    pub fn own_worker(self) -> Test {
        Test { disturbs: Disturbs::OwnWorker, ..self }
    }
}

/// Every test, in the order they run.
pub fn tests() -> Vec<Test> {
    let mut all = Vec::new();
    all.extend(health::tests());
    all.extend(nodes::tests());
    all.extend(routes::tests());
    all.extend(load_balancers::tests());
    all.extend(data_path::tests());
    all.extend(lifecycle::tests());
    all
}

/// What the tests work with.
pub struct World {
    pub client: kube::Client,
    /// Made for this run; the tests' services live here.
    pub namespace: String,
    pub hooks: HookRunner,
    /// Where the CCM serves `/healthz` when it runs outside the cluster (a process of the local
    /// deployer); a CCM running as a pod is found through its leader Lease instead.
    pub ccm_healthz_url: Option<String>,
    /// What the cloud needs on a LoadBalancer Service (providers.yaml `load_balancer_services`).
    pub services: config::LoadBalancerServices,
}

/// `service` with the provider's annotations (its UDP ones too when a port is UDP) and its
/// `loadBalancerClass` unless the service names one.
pub fn for_cloud(services: &config::LoadBalancerServices, mut service: Service) -> Service {
    let ports = service.spec.iter().flat_map(|s| s.ports.iter().flatten());
    let udp = ports.clone().any(|p| p.protocol.as_deref() == Some("UDP"));
    let annotations = services.annotations_for(udp);
    if !annotations.is_empty() {
        service.metadata.annotations.get_or_insert_with(Default::default).extend(annotations);
    }
    if let Some(spec) = service.spec.as_mut()
        && spec.load_balancer_class.is_none()
    {
        spec.load_balancer_class = services.load_balancer_class.clone();
    }
    service
}

impl World {
    /// `service` with what the provider's cloud needs on it ([`for_cloud`]).
    pub fn for_cloud(&self, service: Service) -> Service {
        for_cloud(&self.services, service)
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// The nodes, sorted by name.
    pub async fn list_nodes(&self) -> Result<Vec<Node>, String> {
        let mut nodes =
            self.nodes().list(&ListParams::default()).await.map_err(|e| format!("listing nodes: {e}"))?.items;
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(nodes)
    }

    /// The nodes tests may disturb: not control-plane nodes (where a CCM runs in real clusters),
    /// sorted by name.
    pub async fn workers(&self) -> Result<Vec<Node>, Verdict> {
        let nodes = self.list_nodes().await.map_err(Verdict::Failed)?;
        let workers: Vec<Node> = nodes
            .into_iter()
            .filter(|n| {
                !n.metadata.labels.as_ref().is_some_and(|l| l.contains_key("node-role.kubernetes.io/control-plane"))
            })
            .collect();
        if workers.is_empty() {
            return Err(Verdict::Skipped("the cluster has no worker node to act on".into()));
        }
        Ok(workers)
    }
}

/// The suite as `harness run` and `harness suite cloud-e2e` run it.
#[derive(Debug, Clone)]
pub struct CloudE2eSuite {
    name: String,
    capabilities: BTreeSet<Capability>,
    /// Why the provider lacks a capability, when its entry says.
    unsupported: std::collections::BTreeMap<Capability, String>,
    hooks: Hooks,
    services: config::LoadBalancerServices,
    focus: Option<regex::Regex>,
    skip: Option<regex::Regex>,
    ccm_healthz_url: Option<String>,
    /// Runs of a failing test before it counts as failed (the suite's `flake_attempts`).
    flake_attempts: u32,
}

impl CloudE2eSuite {
    /// The suite `name` for `provider`'s capabilities and hooks; `focus`/`skip` select tests by name.
    pub fn new(name: &str, provider: &Provider, focus: Option<&str>, skip: Option<&str>) -> Result<Self, SuiteError> {
        let regex = |flag: &str, text: Option<&str>| {
            text.map(|text| {
                regex::Regex::new(text).map_err(|e| SuiteError::CannotRun {
                    suite: name.to_owned(),
                    message: format!("{flag} {text:?} is not a regular expression: {e}"),
                })
            })
            .transpose()
        };
        Ok(CloudE2eSuite {
            name: name.to_owned(),
            capabilities: provider.capabilities.clone(),
            unsupported: provider.unsupported.clone(),
            hooks: provider.hooks.clone(),
            services: provider.load_balancer_services.clone(),
            focus: regex("focus", focus)?,
            skip: regex("skip", skip)?,
            ccm_healthz_url: None,
            flake_attempts: 1,
        })
    }

    /// Runs a failing test up to `attempts` times in all; a pass after a failure is flaky.
    pub fn with_flake_attempts(mut self, attempts: u32) -> Self {
        self.flake_attempts = attempts.max(1);
        self
    }

    /// Where the CCM serves `/healthz`, when it runs outside the cluster.
    pub fn with_ccm_healthz_url(mut self, url: Option<String>) -> Self {
        self.ccm_healthz_url = url;
        self
    }

    fn selected(&self, name: &str) -> bool {
        self.focus.as_ref().is_none_or(|f| f.is_match(name)) && !self.skip.as_ref().is_some_and(|s| s.is_match(name))
    }

    /// Why `test` cannot run for this provider, if it cannot.
    fn skip_reason(&self, test: &Test, hooks: &HookRunner) -> Option<String> {
        if let Some(missing) = test.needs.iter().find(|c| !self.capabilities.contains(c)) {
            return Some(super::missing_capability(*missing, &self.unsupported));
        }
        let missing = test.hooks.iter().find(|h| !hooks.has(**h))?;
        Some(format!("the provider declares no `{}` hook (providers.yaml hooks)", missing.as_str()))
    }

    /// Runs one test (or skips it) within the suite's deadline, again after a failure while it has
    /// flake attempts and time left: every attempt goes in its case, so a pass after a failure is
    /// flaky, never a clean pass.
    async fn run_test(&self, test: &Test, world: &World, deadline: Instant) -> TestCase {
        let mut attempts = Vec::new();
        loop {
            let clock = Instant::now();
            let verdict = self.run_once(test, world, deadline).await;
            log_result(test.name, &verdict, clock.elapsed());
            let failed = matches!(verdict, Err(Verdict::Failed(_)));
            attempts.push(attempt(verdict, clock.elapsed()));
            if !failed || attempts.len() >= self.flake_attempts as usize || Instant::now() >= deadline {
                break;
            }
            tracing::info!("cloud-e2e: attempt {} of {}: {}", attempts.len() + 1, self.flake_attempts, test.name);
        }
        TestCase { name: test.name.to_owned(), classname: Some(SUITE.into()), properties: Vec::new(), attempts }
    }

    /// One attempt: a skip when the provider cannot run it, else the test within its time left.
    async fn run_once(&self, test: &Test, world: &World, deadline: Instant) -> TestResult {
        if let Some(reason) = self.skip_reason(test, &world.hooks) {
            return Err(Verdict::Skipped(reason));
        }
        let limit = TEST_LIMIT.min(deadline.saturating_duration_since(Instant::now()));
        match tokio::time::timeout(limit, (test.run)(world)).await {
            Ok(verdict) => verdict,
            Err(_) => fail(format!(
                "the test did not finish within {} (the suite's time left)",
                humantime::format_duration(limit)
            )),
        }
    }

    fn cannot_run(&self, message: impl Into<String>) -> SuiteError {
        SuiteError::CannotRun { suite: self.name.clone(), message: message.into() }
    }

    async fn world(&self, ctx: &SuiteContext) -> Result<World, SuiteError> {
        let client = client(&ctx.kubeconfig).await.map_err(|e| self.cannot_run(e))?;
        let namespace = format!("cloud-e2e-{:08x}", fastrand_u32());
        let object = serde_json::from_value::<Namespace>(json!({
            "metadata": {"name": namespace, "labels": {"app.kubernetes.io/created-by": "cloud-e2e"}}
        }))
        .expect("a valid Namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &object)
            .await
            .map_err(|e| self.cannot_run(format!("creating namespace {namespace}: {e}")))?;
        wait_for_default_service_account(&client, &namespace).await.map_err(|e| self.cannot_run(e))?;
        let ccm_healthz_url = self
            .ccm_healthz_url
            .clone()
            .or_else(|| ctx.vars.get(&Placeholder::SecurePort).map(|port| format!("http://127.0.0.1:{port}/healthz")));
        Ok(World {
            client,
            namespace,
            hooks: HookRunner::new(self.hooks.clone(), ctx.vars.clone()),
            ccm_healthz_url,
            services: self.services.clone(),
        })
    }
}

/// Waits until kube-controller-manager has made `namespace`'s `default` ServiceAccount, as
/// upstream's e2e framework does before a test's first pod: until then the ServiceAccount
/// admission refuses every pod, and a controller manager just restarted (an upgrade's) takes a
/// while to catch up.
async fn wait_for_default_service_account(client: &kube::Client, namespace: &str) -> Result<(), String> {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match accounts.get_opt("default").await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(250)).await,
            Ok(None) => {
                return Err(format!(
                    "namespace {namespace} got no `default` ServiceAccount within 120s: is kube-controller-manager running?"
                ));
            }
            Err(e) => return Err(format!("reading the ServiceAccounts of namespace {namespace}: {e}")),
        }
    }
}

/// A client for the kubeconfig, checked to reach its API server.
pub async fn client(kubeconfig: &Path) -> Result<kube::Client, String> {
    let file = Kubeconfig::read_from(kubeconfig)
        .map_err(|e| format!("cannot read kubeconfig {}: {e}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("kubeconfig {}: {e}", kubeconfig.display()))?;
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(|e| format!("kubeconfig {}: {e}", kubeconfig.display()))?;
    match tokio::time::timeout(Duration::from_secs(15), client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => {
            Err(format!("the API server {server} of kubeconfig {} does not answer: {e}", kubeconfig.display()))
        }
        Err(_) => {
            Err(format!("the API server {server} of kubeconfig {} did not answer within 15s", kubeconfig.display()))
        }
    }
}

fn fastrand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher
        .write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    hasher.finish() as u32
}

#[async_trait]
impl SuiteRunner for CloudE2eSuite {
    fn name(&self) -> &str {
        &self.name
    }

    async fn run(&self, ctx: &SuiteContext) -> Result<SuiteOutcome, SuiteError> {
        let started = Instant::now();
        std::fs::create_dir_all(&ctx.artifacts).map_err(|source| SuiteError::Write {
            suite: self.name.clone(),
            file: ctx.artifacts.clone(),
            source,
        })?;
        let world = self.world(ctx).await?;
        let deadline = started + ctx.timeout;
        let selected: Vec<Test> = tests().into_iter().filter(|t| self.selected(t.name)).collect();
        let group = |disturbs| selected.iter().filter(move |t: &&Test| t.disturbs == disturbs).collect::<Vec<_>>();
        let (concurrent, serial, own_worker) =
            (group(Disturbs::Nothing), group(Disturbs::Everything), group(Disturbs::OwnWorker));
        let names = concurrent.iter().chain(&serial).chain(&own_worker).map(|t| t.name).collect();
        let file = junit_file(&ctx.artifacts, &self.name);
        let write_err = |source| SuiteError::Write { suite: self.name.clone(), file: file.clone(), source };
        let mut progress = progress::Progress::start(file.clone(), names).map_err(write_err)?;
        let world = &world;
        let workers = world.workers().await.map_or(0, |workers| workers.len());
        let lifecycle_at_once = if lifecycle::worker_each(workers) { own_worker.len().max(1) } else { 1 };
        let mut first_slot = 0;
        for (group, at_once) in [(concurrent, CONCURRENT_TESTS), (serial, 1), (own_worker, lifecycle_at_once)] {
            let base = first_slot;
            first_slot += group.len();
            // Made up front: a stream holding a closure over borrowed tests would not be `Send`.
            let runs: Vec<_> = group
                .into_iter()
                .enumerate()
                .map(|(slot, test)| {
                    let run = self.run_test(test, world, deadline);
                    async move { (base + slot, run.await) }
                })
                .collect();
            let mut ended = futures::stream::iter(runs).buffer_unordered(at_once);
            while let Some((slot, case)) = ended.next().await {
                progress.done(slot, case).map_err(write_err)?;
            }
        }
        // Services are gone by now (each test deleted its own); the namespace goes in the background.
        let _ = Api::<Namespace>::all(world.client.clone()).delete(&world.namespace, &DeleteParams::default()).await;

        let report = progress.report();
        let counts = report.counts();
        Ok(SuiteOutcome {
            passed: counts.failed == 0 && counts.errors == 0,
            junit: vec![file],
            summary: format!("{} in {:.1}s", super::exec::counts_text(&counts), started.elapsed().as_secs_f64()),
        })
    }
}

fn log_result(name: &str, verdict: &TestResult, took: Duration) {
    let took = format!("{:.1}s", took.as_secs_f64());
    match verdict {
        Ok(()) => tracing::info!("cloud-e2e: PASSED in {took}: {name}"),
        Err(Verdict::Skipped(why)) => tracing::info!("cloud-e2e: SKIPPED: {name}: {why}"),
        Err(Verdict::Failed(why)) => tracing::warn!("cloud-e2e: FAILED in {took}: {name}: {why}"),
    }
}

fn case(name: &str, verdict: TestResult, took: Duration) -> TestCase {
    TestCase {
        name: name.to_owned(),
        classname: Some(SUITE.into()),
        properties: Vec::new(),
        attempts: vec![attempt(verdict, took)],
    }
}

fn attempt(verdict: TestResult, took: Duration) -> Attempt {
    let (outcome, message) = match verdict {
        Ok(()) => (Outcome::Passed, None),
        Err(Verdict::Failed(why)) => (Outcome::Failed, Some(why)),
        Err(Verdict::Skipped(why)) => (Outcome::Skipped, Some(why)),
    };
    let detail = message.map(|why| Detail { message: Some(why.clone()), kind: None, text: Output::new(why) });
    Attempt { outcome, time: Some(took.as_secs_f64()), detail, ..Attempt::default() }
}

fn report(cases: Vec<TestCase>, took: Duration) -> Report {
    Report {
        name: None,
        suites: vec![Suite { name: SUITE.into(), time: Some(took.as_secs_f64()), cases, ..Suite::default() }],
    }
}

/// The JUnit file a run of suite `name` leaves in `artifacts`.
pub fn junit_file(artifacts: &Path, name: &str) -> PathBuf {
    artifacts.join(format!("junit_{name}.xml"))
}

#[cfg(test)]
mod tests;
