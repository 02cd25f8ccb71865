//! A cloud that exists only in these tests, registered nowhere but here: it proves that `up`'s
//! checks and start, machine actions, load balancers, routes and `down` reach a cloud through the
//! traits alone (no root, no network, no process), and that a new cloud needs no edit elsewhere.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{Cloud, CloudError, CloudErrorKind, CloudFacts, CloudState, InstanceState, Lack, LoadBalancers, Machines};
use crate::machines::MachineAction;
use crate::{ClusterError, ClusterState, LocalCluster, NodeKind, Result, UpOptions};

static FACTS: CloudFacts = CloudFacts {
    name: "fake",
    label: "fake cloud",
    about: "a cloud of the unit tests",
    node_kinds: &[NodeKind::Kwok],
    why_not_other_node_kinds: "it fakes kwok nodes' machines only",
    max_nodes: 4,
    tagged_inventory: false,
    dual_stack: true,
    lacks: &[(Lack::Routes, "the fake keeps no routes")],
};

const CLOUD_CONFIG: &str = "fake-cloud.conf";

/// How the fake behaves.
#[derive(Debug, Default)]
struct FakeCloud {
    /// `start` fails as a cloud that never answered.
    fails_to_start: bool,
    /// `preflight` refuses this many nodes.
    refuses_nodes: Option<u32>,
}

/// What `cluster.json` records of the fake: the machines it was started with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct FakeState {
    machines: Vec<(String, String)>,
    load_balancers: Vec<String>,
}

#[async_trait]
impl Cloud for FakeCloud {
    fn facts(&self) -> &'static CloudFacts {
        &FACTS
    }

    fn preflight(&self, options: &UpOptions) -> Result<()> {
        match self.refuses_nodes {
            Some(refused) if options.nodes == refused => {
                Err(CloudError::new(&FACTS, CloudErrorKind::Invalid, format!("{refused} nodes"), "not today").into())
            }
            _ => Ok(()),
        }
    }

    async fn start(
        &self,
        cluster: &mut LocalCluster,
        machines: &Machines,
        _client: &kube::Client,
    ) -> Result<Arc<dyn CloudState>> {
        if self.fails_to_start {
            return Err(CloudError::new(&FACTS, CloudErrorKind::Unreachable, "starting", "connection refused").into());
        }
        std::fs::write(cluster.dir.join(CLOUD_CONFIG), "fake: true\n").unwrap();
        let machines = machines.list.iter().map(|m| (m.name.clone(), m.ipv4.to_string())).collect();
        Ok(Arc::new(FakeState { machines, load_balancers: vec!["lb-1".into()] }))
    }
}

#[typetag::serde(name = "fake")]
#[async_trait]
impl CloudState for FakeState {
    fn facts(&self) -> &'static CloudFacts {
        &FACTS
    }

    fn cloud_config_file(&self) -> &'static str {
        CLOUD_CONFIG
    }

    async fn act(&self, node: &str, action: MachineAction) -> Result<InstanceState> {
        if !self.machines.iter().any(|(name, _)| name == node) {
            return Err(CloudError::new(&FACTS, CloudErrorKind::NotFound, format!("no machine {node}"), "").into());
        }
        Ok(InstanceState { id: format!("fake-{node}"), state: format!("{action:?}") })
    }

    fn load_balancers(&self) -> Option<&dyn LoadBalancers> {
        Some(self)
    }
}

#[async_trait]
impl LoadBalancers for FakeState {
    async fn list_load_balancers(&self) -> Result<Vec<serde_json::Value>> {
        Ok(self.load_balancers.iter().map(|name| serde_json::json!({ "name": name })).collect())
    }
}

/// A cluster dir with a state and no process, and a client of an API server nobody serves (no
/// request is made).
fn cluster(dir: &std::path::Path, name: &str) -> (LocalCluster, kube::Client) {
    let state = ClusterState::new(name, "v1.37.1", dir.join("kubeconfig"));
    let cluster = LocalCluster { state, dir: dir.to_path_buf() };
    cluster.save().unwrap();
    let config = kube::Config::new("https://127.0.0.1:9".parse().unwrap());
    (cluster, kube::Client::try_from(config).unwrap())
}

fn options(name: &str, nodes: u32, kind: NodeKind, cloud: FakeCloud) -> UpOptions {
    let mut options = UpOptions::new(name, toolchain::default_release());
    (options.nodes, options.node_kind, options.cloud) = (nodes, kind, Some(Arc::new(cloud) as Arc<dyn Cloud>));
    options
}

fn machines(options: &UpOptions) -> Machines {
    use crate::node_sets::{KwokNodes, NodeSet};
    KwokNodes.machines(options)
}

#[tokio::test]
async fn up_starts_the_cloud_with_a_machine_per_node_and_records_it_tagged_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, client) = cluster(dir.path(), "fake-up");
    let options = options("fake-up", 3, NodeKind::Kwok, FakeCloud::default());
    crate::check_options(&options).unwrap();
    let cloud = options.cloud.clone().unwrap();
    crate::start_cloud(cloud.as_ref(), &mut cluster, &machines(&options), &client, 4242).await.unwrap();

    let recorded = crate::load_state_at(dir.path()).unwrap();
    let fake = recorded.cloud_as::<FakeState>().expect("cluster.json holds the fake's own state");
    let names: Vec<&str> = fake.machines.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["fake-up-worker-0", "fake-up-worker-1", "fake-up-worker-2"]);
    assert_eq!(fake.machines[1].1, crate::nodes::node_ip(1).to_string(), "kwok nodes' addresses");
    assert_eq!(recorded.ccm_port, Some(4242));
    let json = std::fs::read_to_string(dir.path().join("cluster.json")).unwrap();
    assert!(json.contains(r#""kind": "fake""#), "{json}");
    assert!(cluster.cloud_config().ends_with(CLOUD_CONFIG) && cluster.cloud_config().exists());
}

#[tokio::test]
async fn a_cloud_that_fails_to_start_is_recorded_nowhere_and_its_error_keeps_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, client) = cluster(dir.path(), "fake-fails");
    let options = options("fake-fails", 2, NodeKind::Kwok, FakeCloud { fails_to_start: true, ..Default::default() });
    let cloud = options.cloud.clone().unwrap();
    let err = crate::start_cloud(cloud.as_ref(), &mut cluster, &machines(&options), &client, 1).await.unwrap_err();
    let ClusterError::Cloud(CloudError { cloud, kind, .. }) = &err else { panic!("{err:?}") };
    assert_eq!((*cloud, *kind), ("fake cloud", CloudErrorKind::Unreachable));
    assert_eq!(err.to_string(), "fake cloud: starting: connection refused");
    assert!(crate::load_state_at(dir.path()).unwrap().cloud.is_none());
}

#[test]
fn up_refuses_what_the_clouds_facts_or_its_preflight_rule_out_before_anything_starts() {
    let err = crate::check_options(&options("fake-real", 2, NodeKind::Real, FakeCloud::default())).unwrap_err();
    assert!(matches!(err, ClusterError::NodeKindNotOnCloud { cloud: "fake", kind: "real", .. }), "{err:?}");
    assert!(err.to_string().contains("it fakes kwok nodes' machines only"), "{err}");

    let err = crate::check_options(&options("fake-many", 5, NodeKind::Kwok, FakeCloud::default())).unwrap_err();
    assert!(err.to_string().contains("at most 4 nodes"), "{err}");

    let refusing = FakeCloud { refuses_nodes: Some(3), ..Default::default() };
    let err = crate::check_options(&options("fake-three", 3, NodeKind::Kwok, refusing)).unwrap_err();
    assert_eq!(err.to_string(), "fake cloud: 3 nodes: not today");
}

#[tokio::test]
async fn machine_actions_load_balancers_and_routes_reach_the_cloud_or_say_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, client) = cluster(dir.path(), "fake-act");
    let options = options("fake-act", 2, NodeKind::Kwok, FakeCloud::default());
    let cloud = options.cloud.clone().unwrap();
    crate::start_cloud(cloud.as_ref(), &mut cluster, &machines(&options), &client, 1).await.unwrap();
    // As `harness cluster instance` meets it: read back from cluster.json.
    let state = crate::load_state_at(dir.path()).unwrap();
    let cloud = crate::machines::cloud_of(&state).unwrap();

    let instance = cloud.act("fake-act-worker-1", MachineAction::Shutdown).await.unwrap();
    assert_eq!((instance.id.as_str(), instance.state.as_str()), ("fake-fake-act-worker-1", "Shutdown"));
    let err = cloud.act("fake-act-worker-9", MachineAction::Terminate).await.unwrap_err();
    assert!(matches!(&err, ClusterError::Cloud(e) if e.kind == CloudErrorKind::NotFound), "{err:?}");

    let balancers = crate::machines::load_balancers_of(&state).await.unwrap();
    assert_eq!(balancers, [serde_json::json!({"name": "lb-1"})]);
    let err = crate::machines::routes_of(&state).await.unwrap_err();
    assert!(matches!(err, ClusterError::CloudLacks { what: "routes", .. }), "{err:?}");
    assert!(err.to_string().contains("the fake keeps no routes"), "{err}");

    let mut without = state.clone();
    without.cloud = None;
    let err = crate::machines::load_balancers_of(&without).await.unwrap_err();
    assert!(matches!(err, ClusterError::NoCloud { .. }), "{err:?}");
}

#[tokio::test]
async fn down_reads_a_cluster_on_the_cloud_and_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_dir = dir.path().join("fake-down");
    std::fs::create_dir_all(&cluster_dir).unwrap();
    let (mut cluster, client) = cluster(&cluster_dir, "fake-down");
    let options = options("fake-down", 1, NodeKind::Kwok, FakeCloud::default());
    let cloud = options.cloud.clone().unwrap();
    crate::start_cloud(cloud.as_ref(), &mut cluster, &machines(&options), &client, 1).await.unwrap();
    assert!(crate::load_state_at(&cluster_dir).is_ok(), "its state reads back, so down stops what it recorded");

    assert!(crate::down_at(&cluster_dir).unwrap());
    assert!(!cluster_dir.exists());
    assert!(!crate::down_at(&cluster_dir).unwrap(), "twice is no error");
}
