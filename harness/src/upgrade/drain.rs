//! Cordon, drain and uncordon, as `kubectl drain --ignore-daemonsets` does them: the node marked
//! unschedulable, then each of its pods evicted (the Eviction API, so PodDisruptionBudgets hold;
//! a pod a budget protects is asked again until it may go), DaemonSet pods and static pods left.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{EvictParams, ListParams, Patch, PatchParams};
use serde_json::json;

/// How long a drain may take before the stage fails.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(180);

/// Marks node `node` (un)schedulable.
pub async fn set_unschedulable(client: &kube::Client, node: &str, unschedulable: bool) -> Result<(), String> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({"spec": {"unschedulable": unschedulable}});
    api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("{} node {node}: {e}", if unschedulable { "cordoning" } else { "uncordoning" }))
}

/// Whether `kubectl drain --ignore-daemonsets` leaves `pod` where it is.
fn stays(pod: &Pod) -> bool {
    let daemon = pod.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet");
    let mirror = pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let done = pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|p| p == "Succeeded" || p == "Failed");
    daemon || mirror || done
}

/// Evicts every pod of node `node` that a drain moves, and waits until they are gone; returns how
/// many it evicted.
pub async fn drain(client: &kube::Client, node: &str) -> Result<usize, String> {
    let all: Api<Pod> = Api::all(client.clone());
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let started = Instant::now();
    let mut evicted = std::collections::BTreeSet::new();
    loop {
        let pods = all.list(&on_node).await.map_err(|e| format!("listing the pods of node {node}: {e}"))?;
        let moving: Vec<&Pod> = pods.items.iter().filter(|p| !stays(p)).collect();
        if moving.is_empty() {
            return Ok(evicted.len());
        }
        let mut refused = Vec::new();
        for pod in &moving {
            let (namespace, name) =
                (pod.metadata.namespace.clone().unwrap_or_default(), pod.metadata.name.clone().unwrap_or_default());
            if pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            match api.evict(&name, &EvictParams::default()).await {
                Ok(_) => {
                    evicted.insert(format!("{namespace}/{name}"));
                }
                // A budget allows no disruption now (429), or the pod is already gone (404).
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(kube::Error::Api(status)) if status.code == 429 => refused.push(format!("{namespace}/{name}")),
                Err(e) => return Err(format!("evicting pod {namespace}/{name} from node {node}: {e}")),
            }
        }
        if started.elapsed() > DRAIN_TIMEOUT {
            let left: Vec<String> = moving
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.metadata.namespace.as_deref().unwrap_or(""),
                        p.metadata.name.as_deref().unwrap_or("")
                    )
                })
                .collect();
            return Err(format!(
                "node {node} did not drain within {DRAIN_TIMEOUT:?}: pods {left:?} are still there (disruption budgets refused {refused:?})"
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_drain_leaves_daemonset_static_and_finished_pods() {
        let daemon = pod(json!({"metadata": {"name": "proxy", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "kube-proxy", "uid": "1"}]}}));
        let mirror = pod(json!({"metadata": {"name": "etcd", "annotations": {"kubernetes.io/config.mirror": "x"}}}));
        let done = pod(json!({"metadata": {"name": "job"}, "status": {"phase": "Succeeded"}}));
        let workload = pod(json!({"metadata": {"name": "web", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "2"}]}, "status": {"phase": "Running"}}));
        assert!(stays(&daemon) && stays(&mirror) && stays(&done));
        assert!(!stays(&workload));
    }
}
