//! The machines of a local cluster with `--cloud local`: each is an instance of the local cloud
//! and the simulated kubelet of its node. Shutting a machine down or terminating it stops both, as
//! on a real cloud (where the kubelet dies with its VM); starting it brings both back. These are
//! the `local` provider's cloud-e2e hooks (`harness cluster instance ...`).

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{ClusterError, ClusterState, Result, aws, client_for, cloud, load_state, nodes};
use ccm::local_cloud::api::LoadBalancer;
use ccm::local_cloud::client::LocalCloud;

/// What happens to a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MachineAction {
    /// Stop it; the instance still exists and can be started again.
    Shutdown,
    /// Start a shut-down machine.
    Start,
    /// Destroy it for good.
    Terminate,
}

impl MachineAction {
    fn verb(self) -> &'static str {
        match self {
            MachineAction::Shutdown => "shutting down",
            MachineAction::Start => "starting",
            MachineAction::Terminate => "terminating",
        }
    }
}

fn cloud_of(state: &ClusterState) -> Result<LocalCloud> {
    let url = state.cloud_url.as_deref().ok_or_else(|| {
        ClusterError::Cloud(format!(
            "cluster '{}' has no local cloud; bring it up with `harness cluster up --cloud local`",
            state.name
        ))
    })?;
    cloud::client(url)
}

/// An instance after an action: its id and the state the cloud reports.
#[derive(Debug, Clone)]
pub struct InstanceState {
    pub id: String,
    pub state: String,
}

/// Applies `action` to the machine of node `node` of cluster `cluster` (its instance in the
/// local cloud, or in moto with `--cloud moto`); returns its instance.
pub async fn act(cluster: &str, node: &str, action: MachineAction) -> Result<InstanceState> {
    let state = load_state(cluster)?;
    let instance = match &state.aws {
        Some(aws_cloud) => {
            let aws_action = match action {
                MachineAction::Shutdown => aws::InstanceAction::Stop,
                MachineAction::Start => aws::InstanceAction::Start,
                MachineAction::Terminate => aws::InstanceAction::Terminate,
            };
            let now = aws::act(aws_cloud, node, aws_action).await?;
            InstanceState { id: aws_cloud.instance(node)?.to_owned(), state: now }
        }
        None => {
            let cloud = cloud_of(&state)?;
            let instance = match action {
                MachineAction::Shutdown => cloud.shutdown_instance(node).await,
                MachineAction::Start => cloud.start_instance(node).await,
                MachineAction::Terminate => cloud.terminate_instance(node).await,
            }
            .map_err(|e| ClusterError::Cloud(format!("{} instance {node}: {e}", action.verb())))?;
            InstanceState { id: instance.id, state: format!("{:?}", instance.state) }
        }
    };
    let kubelet = match action {
        MachineAction::Start => serde_json::Value::Null,
        MachineAction::Shutdown | MachineAction::Terminate => json!("stopped"),
    };
    let patch = json!({"metadata": {"annotations": {nodes::KUBELET_STOPPED: kubelet}}});
    let api: Api<Node> = Api::all(client_for(&state).await?);
    match api.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(instance),
        // A deleted node has no kubelet left to stop.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(instance),
        Err(source) => Err(ClusterError::Kube { cluster: cluster.to_owned(), source }),
    }
}

/// The load balancers of cluster `cluster`'s cloud, as JSON.
pub async fn load_balancers(cluster: &str) -> Result<Vec<serde_json::Value>> {
    let state = load_state(cluster)?;
    if let Some(aws_cloud) = &state.aws {
        return aws::load_balancers(aws_cloud).await;
    }
    let balancers: Vec<LoadBalancer> = cloud_of(&state)?
        .list_load_balancers()
        .await
        .map_err(|e| ClusterError::Cloud(format!("listing load balancers: {e}")))?;
    Ok(balancers.iter().map(|lb| serde_json::to_value(lb).expect("a load balancer serialises")).collect())
}
