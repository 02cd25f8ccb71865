//! The workload an upgrade run keeps up while it upgrades: a Deployment of agnhost `netexec` (one
//! replica per node, spread, at most one unavailable by its PodDisruptionBudget) and a
//! LoadBalancer Service in front of it per protocol the provider's load balancers take (TCP, and
//! UDP with `load-balancer-udp`), in a namespace of its own.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

use crate::suites::cloud_e2e::data_path;
use crate::suites::cloud_e2e::{for_cloud, load_balancers};
use config::{Capability, Provider};

pub const NAMESPACE: &str = "upgrade-workload";
const NAME: &str = "netexec";
const LABELS: &str = "app=netexec";
const READY_TIMEOUT: Duration = Duration::from_secs(240);

/// A load balancer of the workload, as its probe dials it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Balancer {
    /// The Service's name (`netexec-tcp`, `netexec-udp`).
    pub service: String,
    pub udp: bool,
    pub ip: IpAddr,
    pub port: u16,
}

/// What was started.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `(namespace, name)` of each LoadBalancer Service.
    pub services: Vec<(String, String)>,
    /// Their ingress addresses, once the cloud gave them.
    pub balancers: Vec<Balancer>,
}

/// Creates the workload and waits until its pods are Ready and each Service has an ingress.
pub async fn start(client: &kube::Client, provider: &Provider) -> Result<Workload, String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("a Namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .map_err(|e| format!("creating namespace {NAMESPACE}: {e}"))?;
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes.list(&ListParams::default()).await.map_err(|e| format!("listing the nodes: {e}"))?.items;
    let replicas = nodes.len().max(2);
    let image = data_path::agnhost(&nodes);
    create(client, deployment(replicas, &image)).await?;
    create(client, budget()).await?;
    let mut services = Vec::new();
    if provider.has(Capability::LoadBalancers) {
        services.push(("netexec-tcp", false));
        if provider.has(Capability::LoadBalancerUdp) {
            services.push(("netexec-udp", true));
        }
    }
    for (name, udp) in &services {
        let service = data_path::service(name, *udp, json!({"selector": {"app": NAME}}));
        create(client, for_cloud(&provider.load_balancer_services, service)).await?;
    }
    wait_ready(client, replicas).await?;
    let mut balancers = Vec::new();
    for (name, udp) in &services {
        let (ip, port) = (ingress(client, name).await?, if *udp { 5300 } else { 80 });
        balancers.push(Balancer { service: (*name).to_owned(), udp: *udp, ip, port });
    }
    let services = services.iter().map(|(name, _)| (NAMESPACE.to_owned(), (*name).to_owned())).collect();
    Ok(Workload { services, balancers })
}

async fn create<K>(client: &kube::Client, object: K) -> Result<(), String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), NAMESPACE);
    let name = object.meta().name.clone().unwrap_or_default();
    api.create(&PostParams::default(), &object)
        .await
        .map(|_| ())
        .map_err(|e| format!("creating {NAMESPACE}/{name}: {e}"))
}

fn deployment(replicas: usize, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": NAME}},
                    }],
                    "containers": [data_path::netexec_container(image)],
                },
            },
        },
    }))
    .expect("a valid Deployment")
}

fn budget() -> PodDisruptionBudget {
    serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": NAME}}},
    }))
    .expect("a valid PodDisruptionBudget")
}

async fn wait_ready(client: &kube::Client, replicas: usize) -> Result<(), String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let started = Instant::now();
    loop {
        let pods = api.list(&ListParams::default().labels(LABELS)).await.map_err(|e| e.to_string())?.items;
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        if ready >= replicas {
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(format!(
                "the workload's pods were not Ready within {READY_TIMEOUT:?}: {ready} of {replicas} Ready ({:?})",
                pods.iter().map(|p| p.status.as_ref().and_then(|s| s.container_statuses.clone())).collect::<Vec<_>>()
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn ingress(client: &kube::Client, name: &str) -> Result<IpAddr, String> {
    let api: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let started = Instant::now();
    loop {
        let service = api.get(name).await.map_err(|e| e.to_string())?;
        if let Some(point) = load_balancers::ingress(&service).into_iter().next() {
            return data_path::ingress_address(&point).await;
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(format!("service {NAMESPACE}/{name} got no ingress within {READY_TIMEOUT:?}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The workload's container restarts now, by pod: what a stage adds is the pods it did not replace.
pub async fn restarts(client: &kube::Client) -> Result<std::collections::BTreeMap<String, i32>, String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let pods = api.list(&ListParams::default().labels(LABELS)).await.map_err(|e| e.to_string())?.items;
    Ok(pods
        .iter()
        .map(|p| {
            let count =
                p.status.iter().flat_map(|s| s.container_statuses.iter().flatten()).map(|c| c.restart_count).sum();
            (p.metadata.name.clone().unwrap_or_default(), count)
        })
        .collect())
}
