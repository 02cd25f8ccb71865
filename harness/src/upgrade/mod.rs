//! Upgrade runs (`harness run --upgrade-from V`): the cluster comes up at the older release with
//! the provider's CCM for it, a workload goes on it ([`workload`]), and then each component is
//! upgraded in the order the version-skew policy requires ([`config::skew`]; kube-apiserver,
//! kube-controller-manager, kube-scheduler, then each node's kubelet and kube-proxy, cordoned and
//! drained one at a time ([`drain`]), then the CCM), the suites run, everything rolls back in the
//! reverse order, and the suites run again.
//!
//! Each stage is a step of its own (a case of `junit_runner.xml`, kubetest2's convention), with
//! what it disrupted as properties: each probe's worst gap ([`probes`]: the API server, traffic
//! through each load balancer where the cloud carries any) and the workload's container restarts.
//! A stage fails when the cluster the CCM shaped changed ([`invariants`]: a node deleted,
//! registered again or re-initialised, its cloud facts changed, a load balancer recreated or its
//! members changed, a route gone) and had not come back within [`SETTLE`] (it must stay as it was
//! for [`HOLD`], [`CCM_HOLD`] after a CCM starts), or when a load balancer
//! carried no traffic for longer than the run's `--max-traffic-gap`.

pub mod drain;
pub mod invariants;
pub mod probes;
pub mod workload;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::deploy::Upgrader;
use crate::suites::cloud_e2e::data_path;
use crate::suites::cloud_e2e::hooks::HookRunner;
use config::skew::Stage;
use config::{Capability, Provider};
use junit::Property;
use local_cluster::probe::Dial;

/// How long a stage's changes get to settle (a controller catching up) before what still differs
/// from before the stage fails it.
pub const SETTLE: Duration = Duration::from_secs(60);
/// How long the cluster must stay as it was after a stage that restarts a CCM, and after any other.
pub const CCM_HOLD: Duration = Duration::from_secs(15);
pub const HOLD: Duration = Duration::from_secs(5);
/// How long the cluster must stay unchanged to count as settled after the suites.
const QUIET: Duration = Duration::from_secs(5);
/// The longest a load balancer may carry no traffic during a stage, unless the run says otherwise.
pub const DEFAULT_MAX_TRAFFIC_GAP: Duration = Duration::from_secs(30);
/// The name of the API server's probe.
const API_PROBE: &str = "api-server";

/// What an upgrade run was asked for.
#[derive(Debug, Clone)]
pub struct UpgradeOptions {
    /// The release the cluster comes up at, and rolls back to (`--upgrade-from`).
    pub from: String,
    /// The stages' order (`--upgrade-order`); the rollback takes the reverse one.
    pub order: Vec<Stage>,
    /// Run an order the version-skew policy forbids, as a negative test (`--allow-skew-violation`).
    pub allow_skew_violation: bool,
    /// The longest a load balancer may carry no traffic during a stage (`--max-traffic-gap`).
    pub max_traffic_gap: Duration,
}

impl UpgradeOptions {
    pub fn new(from: impl Into<String>) -> Self {
        UpgradeOptions {
            from: from.into(),
            order: Stage::REQUIRED_ORDER.to_vec(),
            allow_skew_violation: false,
            max_traffic_gap: DEFAULT_MAX_TRAFFIC_GAP,
        }
    }
}

/// Which way a stage goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Upgrade,
    Rollback,
}

impl Direction {
    /// The step's name: `Upgrade kube-apiserver`, `Roll back node worker-1`.
    pub fn step(self, what: &str) -> String {
        match self {
            Direction::Upgrade => format!("Upgrade {what}"),
            Direction::Rollback => format!("Roll back {what}"),
        }
    }
}

/// The workload, its probes and the cluster as it was before the stage under way.
pub struct Watcher {
    client: kube::Client,
    hooks: HookRunner,
    probes: probes::Probes,
    services: Vec<(String, String)>,
    baseline: invariants::Snapshot,
    restarts: BTreeMap<String, i32>,
    max_traffic_gap: Duration,
    /// Why no traffic is probed, when none is.
    no_traffic: Option<String>,
}

impl Watcher {
    /// Starts the workload and its probes (once each load balancer has carried traffic), and
    /// records the cluster as it is.
    pub async fn start(
        client: kube::Client,
        provider: &Provider,
        hooks: HookRunner,
        upgrader: &dyn Upgrader,
        max_traffic_gap: Duration,
    ) -> Result<Watcher, String> {
        let workload = workload::start(&client, provider).await?;
        let mut tries: Vec<(String, probes::Try)> = vec![(API_PROBE.into(), api_try(&client))];
        let no_traffic = match (provider.has(Capability::LoadBalancerDataPath), workload.balancers.is_empty()) {
            (_, true) => Some(format!("provider {} has no load balancers here", provider.name)),
            (false, false) => Some(match provider.unsupported.get(&Capability::LoadBalancerDataPath) {
                Some(why) => format!("its load balancers carry no traffic here: {why}"),
                None => format!("provider {} does not declare load-balancer-data-path", provider.name),
            }),
            (true, false) => None,
        };
        if no_traffic.is_none() {
            for balancer in &workload.balancers {
                let attempt = traffic_try(&hooks, balancer);
                first_answer(&balancer.service, &attempt).await?;
                tries.push((format!("lb-{}", balancer.service), attempt));
            }
        }
        let probes = probes::Probes::start(tries);
        let baseline = invariants::take(&client, &workload.services, &hooks, upgrader.routes().await).await?;
        let restarts = workload::restarts(&client).await?;
        Ok(Watcher {
            client,
            hooks,
            probes,
            services: workload.services,
            baseline,
            restarts,
            max_traffic_gap,
            no_traffic,
        })
    }

    /// Why no load balancer's traffic is probed, when none is.
    pub fn no_traffic(&self) -> Option<&str> {
        self.no_traffic.as_deref()
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Starts measuring a stage: the probes' windows start now.
    pub fn begin(&mut self) {
        self.probes.take();
    }

    /// Ends a stage: waits until the cluster is as it was and stays so for `hold` (up to
    /// [`SETTLE`]), reads what the probes saw, and says whether the stage held; its properties either way. The cluster as it is now
    /// is the next stage's baseline.
    pub async fn end(&mut self, upgrader: &dyn Upgrader, hold: Duration) -> (Result<(), String>, Vec<Property>) {
        let (held, snapshot) = self.settle(upgrader, hold).await;
        let measured = self.probes.take();
        let restarts = workload::restarts(&self.client).await.unwrap_or_default();
        let added: i32 =
            restarts.iter().filter_map(|(pod, now)| self.restarts.get(pod).map(|before| (now - before).max(0))).sum();
        self.restarts = restarts;
        if let Some(snapshot) = snapshot {
            self.baseline = snapshot;
        }
        let mut properties = disruption_properties(&measured);
        properties.push(property("workload-container-restarts", added));
        let mut failures = held.err().into_iter().collect::<Vec<_>>();
        failures.extend(self.over_budget(&measured));
        match failures.is_empty() {
            true => (Ok(()), properties),
            false => (Err(failures.join("; ")), properties),
        }
    }

    /// Takes the cluster as the baseline once it has stopped changing (after the suites, which
    /// change it on purpose: the CCM may still be removing a node they terminated from the load
    /// balancers), or as it is after [`SETTLE`].
    pub async fn rebaseline(&mut self, upgrader: &dyn Upgrader) -> Result<(), String> {
        let started = Instant::now();
        let mut last = invariants::take(&self.client, &self.services, &self.hooks, upgrader.routes().await).await?;
        loop {
            tokio::time::sleep(QUIET).await;
            let now = invariants::take(&self.client, &self.services, &self.hooks, upgrader.routes().await).await?;
            let quiet = now == last;
            last = now;
            if quiet || started.elapsed() > SETTLE {
                break;
            }
        }
        self.baseline = last;
        self.restarts = workload::restarts(&self.client).await?;
        self.probes.take();
        Ok(())
    }

    /// Waits until nothing has differed from the baseline for `hold` (a component just started
    /// acts within it: a CCM reconciles every load balancer and route when it starts); what still
    /// differs after [`SETTLE`].
    async fn settle(
        &self,
        upgrader: &dyn Upgrader,
        hold: Duration,
    ) -> (Result<(), String>, Option<invariants::Snapshot>) {
        let started = Instant::now();
        let mut unchanged_since: Option<Instant> = None;
        loop {
            let now = invariants::take(&self.client, &self.services, &self.hooks, upgrader.routes().await).await;
            let changes = match &now {
                Ok(now) => invariants::changes(&self.baseline, now),
                Err(error) => vec![format!("the cluster could not be read: {error}")],
            };
            if changes.is_empty() {
                let since = *unchanged_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= hold {
                    return (Ok(()), now.ok());
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            unchanged_since = None;
            if started.elapsed() > SETTLE {
                let why = format!("still changed {}s after the stage: {}", SETTLE.as_secs(), changes.join("; "));
                return (Err(why), now.ok());
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// Each load balancer's probe whose worst gap is over the budget.
    fn over_budget(&self, measured: &[probes::Measured]) -> Vec<String> {
        measured
            .iter()
            .filter(|m| m.name != API_PROBE && m.worst_gap > self.max_traffic_gap)
            .map(|m| {
                format!(
                    "{} carried no traffic for {:.1}s (at most {}s allowed, --max-traffic-gap; {} of {} tries failed, the last: {})",
                    m.name,
                    m.worst_gap.as_secs_f64(),
                    self.max_traffic_gap.as_secs(),
                    m.failures,
                    m.tries,
                    m.last_error.as_deref().unwrap_or("none")
                )
            })
            .collect()
    }
}

fn property(name: &str, value: impl ToString) -> Property {
    Property { name: name.to_owned(), value: value.to_string() }
}

/// Each probe's worst gap and failed tries as `junit_runner.xml` properties.
fn disruption_properties(measured: &[probes::Measured]) -> Vec<Property> {
    measured
        .iter()
        .flat_map(|m| {
            [
                property(&format!("{}-worst-gap-seconds", m.name), format!("{:.1}", m.worst_gap.as_secs_f64())),
                property(&format!("{}-failed-tries", m.name), format!("{} of {}", m.failures, m.tries)),
            ]
        })
        .collect()
}

/// `GET /readyz` of the API server.
fn api_try(client: &kube::Client) -> probes::Try {
    let client = client.clone();
    Arc::new(move || {
        let client = client.clone();
        Box::pin(async move {
            let request = http::Request::get("/readyz").body(Vec::new()).expect("a valid request");
            match client.request_text(request).await {
                Ok(body) if body.trim() == "ok" => Ok(()),
                Ok(body) => Err(format!("/readyz answered {body:?}")),
                Err(e) => Err(e.to_string()),
            }
        })
    })
}

/// A request through `balancer` to the workload: `GET /hostname` over TCP, an echo over UDP.
fn traffic_try(hooks: &HookRunner, balancer: &workload::Balancer) -> probes::Try {
    let (hooks, balancer) = (hooks.clone(), balancer.clone());
    Arc::new(move || {
        let (hooks, balancer) = (hooks.clone(), balancer.clone());
        Box::pin(async move {
            let send = match balancer.udp {
                true => "echo upgrade-probe".to_owned(),
                false => "GET /hostname HTTP/1.0\r\n\r\n".to_owned(),
            };
            let dial = Dial {
                ip: balancer.ip,
                port: balancer.port,
                udp: balancer.udp,
                send: Some(send),
                timeout: Duration::from_secs(2),
            };
            let answer = data_path::dial_through(&hooks, dial).await?;
            let answered = match balancer.udp {
                true => answer.trim() == "upgrade-probe",
                false => answer.starts_with("HTTP/1.") && answer.lines().next().is_some_and(|l| l.contains(" 200 ")),
            };
            if answered { Ok(()) } else { Err(format!("answered {answer:?}")) }
        })
    })
}

/// Waits (up to two minutes) until `attempt` is answered once: the load balancer works before
/// anything is upgraded.
async fn first_answer(service: &str, attempt: &probes::Try) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let error = match tokio::time::timeout(Duration::from_secs(5), attempt()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(error)) => error,
            Err(_) => "no answer within 5s".into(),
        };
        if started.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "the load balancer of service {service} carried no traffic before the upgrade: {error}"
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Renames every test of the JUnit files under `dir` to `<name> <suffix>`, so that the suites run
/// again after a rollback show as rows of their own on TestGrid.
pub fn rename_tests(dir: &std::path::Path, suffix: &str) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("listing {}: {e}", dir.display()))?;
    for path in entries.flatten().map(|e| e.path()) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if !(name.starts_with("junit") && name.ends_with(".xml")) {
            continue;
        }
        let mut report = junit::read_file(&path, &junit::ReadOptions::default()).map_err(|e| e.to_string())?;
        for suite in &mut report.suites {
            for case in &mut suite.cases {
                case.name = format!("{} {suffix}", case.name);
            }
        }
        std::fs::write(&path, junit::to_string(&report)).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disruption_becomes_one_pair_of_properties_per_probe() {
        let measured = [probes::Measured {
            name: "lb-netexec-tcp".into(),
            worst_gap: Duration::from_millis(2340),
            tries: 20,
            failures: 3,
            last_error: Some("refused".into()),
        }];
        let properties = disruption_properties(&measured);
        let pairs: Vec<(&str, &str)> = properties.iter().map(|p| (p.name.as_str(), p.value.as_str())).collect();
        assert_eq!(pairs, [("lb-netexec-tcp-worst-gap-seconds", "2.3"), ("lb-netexec-tcp-failed-tries", "3 of 20")]);
    }

    #[test]
    fn the_suites_after_a_rollback_are_renamed_in_their_junit_files() {
        let dir = tempfile::tempdir().unwrap();
        let xml = r#"<testsuite name="cloud-e2e"><testcase name="[cloud-e2e] a"/><testcase name="[cloud-e2e] b"><failure message="x"/></testcase></testsuite>"#;
        std::fs::write(dir.path().join("junit_cloud-e2e.xml"), xml).unwrap();
        std::fs::write(dir.path().join("notes.xml"), "<x/>").unwrap();
        rename_tests(dir.path(), "(rolled back)").unwrap();
        let report = junit::read_file(&dir.path().join("junit_cloud-e2e.xml"), &junit::ReadOptions::default()).unwrap();
        let names: Vec<(String, junit::Status)> = report.cases().map(|(_, c)| (c.name.clone(), c.status())).collect();
        assert_eq!(
            names,
            [
                ("[cloud-e2e] a (rolled back)".to_owned(), junit::Status::Passed),
                ("[cloud-e2e] b (rolled back)".to_owned(), junit::Status::Failed)
            ]
        );
        assert_eq!(std::fs::read_to_string(dir.path().join("notes.xml")).unwrap(), "<x/>", "not a JUnit file");
    }
}
