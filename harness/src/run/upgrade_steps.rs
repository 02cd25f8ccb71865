//! The steps of an upgrade run after Deploy ([`crate::upgrade`]): Workload, then a step per
//! component upgraded in the run's order, `Test (upgraded)`, a step per component rolled back in
//! the reverse order, and `Test (rolled back)`. A failed step skips the rest, as any step does.

use std::path::Path;
use std::time::{Duration, Instant};

use super::ccm_steps::{self, Built};
use super::steps::{StepResult, Steps};
use super::{Plan, RunOptions, Tested, skip_rest, test_step, with_version};
use crate::deploy::{Deployer, Upgrader};
use crate::suites::cloud_e2e::hooks::HookRunner;
use crate::upgrade::{Direction, UpgradeOptions, Watcher, drain, rename_tests};
use config::skew::Stage;
use config::template::Vars;
use junit::Property;
use results::layout::BuildWriter;

/// The CCM built for each release of the run.
pub(super) struct Builds<'a> {
    pub from: &'a Built,
    pub to: &'a Built,
}

/// What one step changes.
enum Change {
    ControlPlane(&'static str),
    Node(String),
    Ccm,
}

impl Change {
    fn what(&self) -> String {
        match self {
            Change::ControlPlane(component) => (*component).to_owned(),
            Change::Node(node) => format!("node {node}"),
            Change::Ccm => "cloud-controller-manager".into(),
        }
    }
}

/// Where the suites of each Test step write: a directory each, so the second run keeps the first's.
const UPGRADED: (&str, &str) = ("Test (upgraded)", "upgraded");
const ROLLED_BACK: (&str, &str) = ("Test (rolled back)", "rolled-back");

#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    plan: &Plan<'_>,
    opts: &RunOptions,
    writer: &BuildWriter,
    steps: &mut Steps,
    deployer: &mut dyn Deployer,
    built: &Builds<'_>,
    vars: &Vars,
    tested: &mut Tested,
    upgrade: &UpgradeOptions,
) {
    let mut later = vec![UPGRADED.0, ROLLED_BACK.0];
    let Some(kubeconfig) = deployer.kubeconfig() else {
        steps.record("Workload", StepResult::Failed("the deployer gave no kubeconfig".into()), Duration::ZERO);
        return skip_rest(steps, &later, "Workload failed");
    };
    let hooks = HookRunner::new(plan.provider.hooks.clone(), vars.clone());
    let start = async {
        let client = crate::suites::cloud_e2e::client(&kubeconfig).await?;
        let upgrader = upgrader_of(deployer)?;
        Watcher::start(client, plan.provider, hooks, upgrader, upgrade.max_traffic_gap).await
    };
    let Some(mut watcher) = steps.run("Workload", start).await else {
        return skip_rest(steps, &later, "Workload failed");
    };
    if let Some(why) = watcher.no_traffic() {
        steps.note(format!("no load balancer traffic is probed during the stages: {why}"));
    }
    let (from, to) = (plan.up_version().to_string(), plan.version.to_string());
    let to_vars = with_version(vars, &plan.version);
    let artifacts = writer.artifacts_dir();
    let passes = [
        (Direction::Upgrade, upgrade.order.clone(), &to, built.to, &to_vars, UPGRADED),
        (Direction::Rollback, upgrade.order.iter().rev().copied().collect(), &from, built.from, vars, ROLLED_BACK),
    ];
    for (direction, order, version, ccm, ccm_vars, (test_name, subdir)) in passes {
        let previous = if direction == Direction::Upgrade { built.from } else { built.to };
        for stage in order {
            let changes = match changes_of(stage, direction, deployer).await {
                Ok(changes) => changes,
                Err(why) => {
                    steps.record(&direction.step(stage.as_str()), StepResult::Failed(why), Duration::ZERO);
                    return skip_rest(steps, &later, "an upgrade stage failed");
                }
            };
            if changes.is_empty() {
                let why = "no node runs a kubelet this deployer can replace (simulated nodes)".to_owned();
                steps.record(&direction.step(stage.as_str()), StepResult::Skipped(why), Duration::ZERO);
            }
            for change in changes {
                let swap = CcmSwap { plan, opts, old: previous, new: ccm, vars: ccm_vars };
                let name = direction.step(&change.what());
                let held = stage_step(steps, &mut watcher, deployer, &name, &change, version, &swap).await;
                if !held {
                    return skip_rest(steps, &later, &format!("step {name} failed"));
                }
            }
        }
        let dir = artifacts.join(subdir);
        later.retain(|name| *name != test_name);
        let tested_ok =
            test_step(test_name, plan, opts, writer, steps, deployer, ccm_vars, tested, version, &dir).await;
        if direction == Direction::Rollback
            && let Err(e) = rename_tests(&dir, "(rolled back)")
        {
            steps.note(format!("the rolled-back suites' JUnit files keep their names: {e}"));
        }
        if !tested_ok {
            return skip_rest(steps, &later, &format!("{test_name} failed"));
        }
        if direction == Direction::Rollback {
            return;
        }
        // The suites change the cluster on purpose (a node terminated, say): the next stage
        // compares with the cluster they left.
        let rebased = match upgrader_of(deployer) {
            Ok(upgrader) => watcher.rebaseline(upgrader).await,
            Err(e) => Err(e),
        };
        if let Err(e) = rebased {
            steps.note(format!("reading the cluster after {test_name}: {e}"));
        }
    }
}

fn upgrader_of(deployer: &mut dyn Deployer) -> Result<&mut dyn Upgrader, String> {
    let name = deployer.name();
    deployer.upgrader().ok_or_else(|| {
        format!("the {name} deployer cannot change a running cluster's release (only the local one can)")
    })
}

/// What `stage` changes, in order: the control plane's components (upgraded kube-apiserver first,
/// rolled back last), each node the deployer can upgrade, or the CCM.
async fn changes_of(stage: Stage, direction: Direction, deployer: &mut dyn Deployer) -> Result<Vec<Change>, String> {
    Ok(match stage {
        Stage::ControlPlane => {
            let mut components: Vec<Change> =
                local_cluster::upgrade::CONTROL_PLANE.iter().map(|c| Change::ControlPlane(c)).collect();
            if direction == Direction::Rollback {
                components.reverse();
            }
            components
        }
        Stage::Nodes => {
            let upgrader = upgrader_of(deployer)?;
            let nodes = upgrader.upgradable_nodes().await.map_err(|e| e.to_string())?;
            nodes.into_iter().map(Change::Node).collect()
        }
        Stage::Ccm => vec![Change::Ccm],
    })
}

/// The CCM of one release taking over from the other's.
struct CcmSwap<'a> {
    plan: &'a Plan<'a>,
    opts: &'a RunOptions,
    old: &'a Built,
    new: &'a Built,
    vars: &'a Vars,
}

/// Runs `change` as step `name`, measured; whether it held.
async fn stage_step(
    steps: &mut Steps,
    watcher: &mut Watcher,
    deployer: &mut dyn Deployer,
    name: &str,
    change: &Change,
    version: &str,
    ccm: &CcmSwap<'_>,
) -> bool {
    let progress = cli_support::progress::step(format!("step {name}"));
    let started = Instant::now();
    watcher.begin();
    let (result, extra) = apply(watcher, deployer, change, version, ccm).await;
    let hold = match change {
        Change::Ccm => crate::upgrade::CCM_HOLD,
        _ => crate::upgrade::HOLD,
    };
    let (held, mut properties) = match upgrader_of(deployer) {
        Ok(upgrader) => watcher.end(upgrader, hold).await,
        Err(e) => (Err(e), Vec::new()),
    };
    properties.insert(0, Property { name: "to".into(), value: version.to_owned() });
    properties.extend(extra);
    let result = match (result, held) {
        (Ok(()), Ok(())) => StepResult::Passed,
        (Err(e), _) | (Ok(()), Err(e)) => StepResult::Failed(e),
    };
    let passed = result == StepResult::Passed;
    if passed {
        progress.done();
    }
    steps.record_measured(name, result, started.elapsed(), properties);
    passed
}

/// Makes `change`: what it measured of its own besides the watcher's.
async fn apply(
    watcher: &Watcher,
    deployer: &mut dyn Deployer,
    change: &Change,
    version: &str,
    ccm: &CcmSwap<'_>,
) -> (Result<(), String>, Vec<Property>) {
    match change {
        Change::ControlPlane(component) => {
            let result = match upgrader_of(deployer) {
                Ok(upgrader) => upgrader.replace_control_plane(component, version).await.map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            (result, Vec::new())
        }
        Change::Node(node) => {
            let client = watcher.client();
            let mut evicted = 0;
            let result = async {
                drain::set_unschedulable(client, node, true).await?;
                evicted = drain::drain(client, node).await?;
                upgrader_of(deployer)?.replace_node(node, version).await.map_err(|e| e.to_string())?;
                drain::set_unschedulable(client, node, false).await
            }
            .await;
            (result, vec![Property { name: "evicted-pods".into(), value: evicted.to_string() }])
        }
        Change::Ccm => (swap_ccm(deployer, ccm).await, ccm_properties(ccm)),
    }
}

fn ccm_properties(ccm: &CcmSwap<'_>) -> Vec<Property> {
    let shown = |built: &Built| {
        built.version.clone().or_else(|| built.binary.as_ref().map(|b| b.display().to_string())).unwrap_or_default()
    };
    let mut properties = vec![Property { name: "ccm".into(), value: shown(ccm.new) }];
    if ccm.old.binary.is_some() && ccm.old.binary == ccm.new.binary {
        // The bundled reference CCM is one build for every release: the stage restarts it.
        properties.push(Property { name: "ccm-build".into(), value: "the same build for both releases".into() });
    }
    properties
}

/// Stops the CCM running now (a process the deployer started) and deploys the other release's.
async fn swap_ccm(deployer: &mut dyn Deployer, ccm: &CcmSwap<'_>) -> Result<(), String> {
    if let config::CcmDeploy::Process { .. } = &ccm.plan.provider.ccm.deploy {
        let old = ccm.old.binary.as_deref().unwrap_or(Path::new("ccm"));
        let name = deployer.name();
        let host = deployer
            .process_host()
            .ok_or_else(|| crate::deploy::DeployError::NoProcessHost { deployer: name }.to_string())?;
        host.stop_ccm_process(old).await.map_err(|e| e.to_string())?;
    }
    let mut vars = ccm.vars.clone();
    if let Some(binary) = &ccm.new.binary {
        vars.insert(config::template::Placeholder::CcmBinary, binary.display().to_string());
    }
    vars.extend(deployer.vars());
    ccm_steps::deploy(ccm.plan.provider, ccm.opts, deployer, ccm.new, &vars).await
}
