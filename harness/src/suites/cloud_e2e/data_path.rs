//! Load balancers carry traffic (capability `load-balancer-data-path`): requests through a
//! service's ingress IP reach its pods (agnhost `netexec`, which answers with its host name, the
//! pod's name), over TCP and UDP; source ranges admit and refuse; an excluded node stops getting
//! traffic; with `externalTrafficPolicy: Local`, only the node with an endpoint gets any
//! (`load-balancer-health-checks`).
//!
//! The tests dial through the provider's `probe_load_balancer` hook when it has one (a client on
//! the cloud's network: the `local` provider's is `harness cluster lb-probe`), else from the test
//! runner itself, as on a real cloud. They need nodes that run pods: on kwok's simulated nodes
//! they are skipped, saying so.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::hooks::HookKind;
use super::{Test, TestResult, Verdict, World, wait};
use config::Capability;
use local_cluster::probe::{self, Dial};

const NEEDS: &[Capability] = &[Capability::LoadBalancers, Capability::LoadBalancerDataPath];
const NEEDS_HEALTH_CHECKS: &[Capability] =
    &[Capability::LoadBalancers, Capability::LoadBalancerDataPath, Capability::LoadBalancerHealthChecks];
const TIMEOUT: Duration = Duration::from_secs(150);
/// The image when no node lists one: agnhost of Kubernetes v1.37's e2e manifest.
const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.66.1";
const HTTP_PORT: i32 = 8080;
const UDP_PORT: i32 = 8081;
const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Documentation range (RFC 5737): never a real client.
const NOBODY: &str = "203.0.113.0/24";
/// How many answers in a row must come from the nodes still in the load balancer.
const IN_A_ROW: usize = 10;

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancerDataPath] Service of type LoadBalancer should carry a TCP request through its ingress IP to a pod",
            NEEDS,
            |w| tcp_reaches_a_pod(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancerDataPath] Service of type LoadBalancer should carry a UDP echo through its ingress IP and back",
            NEEDS,
            |w| udp_echo(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancerDataPath] Service of type LoadBalancer should admit clients inside its loadBalancerSourceRanges and refuse others",
            NEEDS,
            |w| source_ranges(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancerDataPath] Service of type LoadBalancer should stop sending traffic to a node excluded from load balancers",
            NEEDS,
            |w| excluded_node(w).boxed(),
        )
        .serial(),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancerHealthChecks] Service of type LoadBalancer with externalTrafficPolicy Local should send traffic only to the node with its endpoint",
            NEEDS_HEALTH_CHECKS,
            |w| only_the_node_with_an_endpoint(w).boxed(),
        ),
    ]
}

/// The nodes that run pods, sorted by name; a skip when they are kwok's.
async fn real_nodes(w: &World) -> Result<Vec<Node>, Verdict> {
    let workers = w.workers().await?;
    let simulated = |n: &Node| n.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("kwok.x-k8s.io/node"));
    if workers.iter().any(simulated) {
        return Err(Verdict::Skipped(
            "the nodes are simulated by kwok (annotation kwok.x-k8s.io/node): no pod runs on them, so no traffic can reach one; run on real nodes (harness cluster up --node-kind real)".into(),
        ));
    }
    Ok(workers)
}

/// The agnhost image the nodes have, or upstream's.
pub(crate) fn agnhost(nodes: &[Node]) -> String {
    let names = nodes.iter().flat_map(|n| n.status.iter().flat_map(|s| s.images.iter().flatten()));
    names
        .flat_map(|image| image.names.iter().flatten())
        .find(|name| name.contains("/e2e-test-images/agnhost:"))
        .cloned()
        .unwrap_or_else(|| AGNHOST.into())
}

/// Starts a `netexec` pod named `name-<i>` on each of `nodes`, labelled `app: name`, and waits
/// until all are Ready; returns their names in node order.
async fn start_pods(w: &World, name: &str, nodes: &[Node]) -> Result<Vec<String>, Verdict> {
    let api: Api<Pod> = Api::namespaced(w.client.clone(), &w.namespace);
    let image = agnhost(nodes);
    let mut names = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        let pod_name = format!("{name}-{index}");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": pod_name, "labels": {"app": name}},
            "spec": {
                "nodeName": node.metadata.name,
                "terminationGracePeriodSeconds": 1,
                "containers": [netexec_container(&image)],
            },
        }))
        .expect("a valid Pod");
        api.create(&PostParams::default(), &pod).await?;
        names.push(pod_name);
    }
    let what = format!("pods {} ({image}) to be Ready", names.join(", "));
    wait::until(&what, TIMEOUT, || async {
        let mut waiting = Vec::new();
        for pod_name in &names {
            let pod = api.get(pod_name).await.map_err(|e| e.to_string())?;
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if !ready {
                waiting.push(format!("{pod_name}: {:?}", pod.status.and_then(|s| s.container_statuses)));
            }
        }
        if waiting.is_empty() { Ok(()) } else { Err(waiting.join("; ")) }
    })
    .await?;
    Ok(names)
}

/// agnhost `netexec` from `image`, answering HTTP on [`HTTP_PORT`] (`/hostname`: its pod's name)
/// and UDP echoes on [`UDP_PORT`], Ready once it listens.
pub(crate) fn netexec_container(image: &str) -> serde_json::Value {
    json!({
        "name": "netexec",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["netexec", format!("--http-port={HTTP_PORT}"), format!("--udp-port={UDP_PORT}")],
        "readinessProbe": {"tcpSocket": {"port": HTTP_PORT}, "periodSeconds": 1},
    })
}

/// A LoadBalancer Service `name` in front of the pods labelled `app: name` (TCP 80, or UDP 5300),
/// with `extra` merged into its spec.
pub(crate) fn service(name: &str, udp: bool, extra: serde_json::Value) -> Service {
    let port = match udp {
        true => json!({"name": "udp", "protocol": "UDP", "port": 5300, "targetPort": UDP_PORT}),
        false => json!({"name": "http", "protocol": "TCP", "port": 80, "targetPort": HTTP_PORT}),
    };
    let mut spec = json!({"type": "LoadBalancer", "selector": {"app": name}, "ports": [port]});
    if let (Some(spec), serde_json::Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a valid Service")
}

fn services(w: &World) -> Api<Service> {
    Api::namespaced(w.client.clone(), &w.namespace)
}

/// Pods on the real nodes, a LoadBalancer service in front of them, `body` with the pods' names
/// and the ingress IP; then both are deleted, whatever happened.
async fn with_backend<'a, F>(
    w: &'a World,
    name: &'a str,
    service: Service,
    nodes: &'a [Node],
    body: impl FnOnce(Vec<String>, IpAddr) -> F,
) -> TestResult
where
    F: Future<Output = TestResult> + 'a,
{
    let result = async {
        let pods = start_pods(w, name, nodes).await?;
        services(w).create(&PostParams::default(), &service).await?;
        let ip = ingress_ip(w, name).await?;
        body(pods, ip).await
    }
    .await;
    let _ = services(w).delete(name, &DeleteParams::default()).await;
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), &w.namespace);
    for index in 0..nodes.len() {
        let _ = pods.delete(&format!("{name}-{index}"), &DeleteParams::default()).await;
    }
    result
}

async fn ingress_ip(w: &World, name: &str) -> Result<IpAddr, Verdict> {
    let what = format!("an ingress address in the status of service {}/{name}", w.namespace);
    let point = wait::until(&what, TIMEOUT, || async {
        let service = services(w).get(name).await.map_err(|e| e.to_string())?;
        super::load_balancers::ingress(&service).into_iter().next().ok_or_else(|| "no ingress yet".to_owned())
    })
    .await?;
    ingress_address(&point).await.map_err(|e| Verdict::Failed(format!("the ingress of service {name}: {e}")))
}

/// An ingress point's address: the IP itself (IPv4 or IPv6), or what its host name resolves to,
/// IPv4 first (AWS's load balancers give a DNS name).
pub async fn ingress_address(point: &str) -> Result<IpAddr, String> {
    if let Ok(ip) = point.parse() {
        return Ok(ip);
    }
    let resolved: Vec<IpAddr> = tokio::net::lookup_host((point, 0))
        .await
        .map_err(|e| format!("host name {point:?} does not resolve: {e}"))?
        .map(|address| address.ip())
        .collect();
    let first = resolved.iter().find(|ip| ip.is_ipv4()).or(resolved.first());
    first.copied().ok_or_else(|| format!("host name {point:?} resolves to no address"))
}

/// Dials through the provider's probe hook, or from here.
async fn dial(w: &World, dial: Dial) -> Result<String, String> {
    dial_through(&w.hooks, dial).await
}

/// Dials through the `probe_load_balancer` hook of `hooks` when it has one, or from here.
pub(crate) async fn dial_through(hooks: &super::hooks::HookRunner, dial: Dial) -> Result<String, String> {
    if hooks.has(HookKind::ProbeLoadBalancer) {
        let mut extra = vec![format!("--ip={}", dial.ip), format!("--port={}", dial.port)];
        if dial.udp {
            extra.push("--udp".into());
        }
        extra.extend(dial.send.iter().map(|send| format!("--send={send}")));
        return hooks.run_with(HookKind::ProbeLoadBalancer, None, &extra).await;
    }
    tokio::task::spawn_blocking(move || probe::dial(&dial)).await.map_err(|e| e.to_string())?
}

/// `GET /hostname` through the ingress IP: the name of the pod that answered.
async fn hostname(w: &World, ip: IpAddr) -> Result<String, String> {
    let request = "GET /hostname HTTP/1.0\r\n\r\n".to_owned();
    let answer =
        dial(w, Dial { ip, port: 80, udp: false, send: Some(request), timeout: Duration::from_secs(5) }).await?;
    match answer.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.") && head.contains(" 200 ") => Ok(body.trim().to_owned()),
        _ => Err(format!("not an HTTP 200 answer: {answer:?}")),
    }
}

async fn tcp_reaches_a_pod(w: &World) -> TestResult {
    const NAME: &str = "dp-tcp";
    let nodes = real_nodes(w).await?;
    with_backend(w, NAME, w.for_cloud(service(NAME, false, json!({}))), &nodes, |pods, ip| async move {
        let what = format!("GET /hostname through {ip}:80 to answer with one of the pods {pods:?}");
        wait::until(&what, TIMEOUT, || async {
            let name = hostname(w, ip).await?;
            if pods.contains(&name) { Ok(()) } else { Err(format!("answered by {name:?}")) }
        })
        .await
    })
    .await
}

async fn udp_echo(w: &World) -> TestResult {
    const NAME: &str = "dp-udp";
    let nodes = real_nodes(w).await?;
    with_backend(w, NAME, w.for_cloud(service(NAME, true, json!({}))), &nodes, |_, ip| async move {
        let what = format!("a UDP echo through {ip}:5300 to come back");
        wait::until(&what, TIMEOUT, || async {
            let send = Some("echo cloud-e2e-data-path".to_owned());
            let answer = dial(w, Dial { ip, port: 5300, udp: true, send, timeout: Duration::from_secs(3) }).await?;
            if answer.trim() == "cloud-e2e-data-path" { Ok(()) } else { Err(format!("answered {answer:?}")) }
        })
        .await
    })
    .await
}

async fn set_ranges(w: &World, name: &str, ranges: &[&str]) -> Result<(), Verdict> {
    let patch = json!({"spec": {"loadBalancerSourceRanges": ranges}});
    services(w).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// Waits until `IN_A_ROW` dials in a row are refused (or go unanswered).
async fn refused(w: &World, ip: IpAddr, after: &str) -> TestResult {
    let what = format!("{ip}:80 to refuse {IN_A_ROW} requests in a row {after}");
    wait::until(&what, TIMEOUT, || async {
        for _ in 0..IN_A_ROW {
            if let Ok(name) = hostname(w, ip).await {
                return Err(format!("pod {name} answered"));
            }
        }
        Ok(())
    })
    .await
}

async fn source_ranges(w: &World) -> TestResult {
    const NAME: &str = "dp-ranges";
    let nodes = real_nodes(w).await?;
    let service = w.for_cloud(service(NAME, false, json!({"loadBalancerSourceRanges": [NOBODY]})));
    with_backend(w, NAME, service, &nodes, |pods, ip| async move {
        // Admitted: the client is inside 0.0.0.0/0, whatever its address.
        set_ranges(w, NAME, &[NOBODY, "0.0.0.0/0"]).await?;
        let what = format!("{ip}:80 to admit the client once 0.0.0.0/0 is among the source ranges");
        wait::until(&what, TIMEOUT, || async {
            let name = hostname(w, ip).await?;
            if pods.contains(&name) { Ok(()) } else { Err(format!("answered by {name:?}")) }
        })
        .await?;
        // Refused: only a range no client is in.
        set_ranges(w, NAME, &[NOBODY]).await?;
        refused(w, ip, &format!("once the source ranges are only {NOBODY}")).await
    })
    .await
}

async fn set_excluded(w: &World, node: &str, excluded: bool) -> Result<Node, kube::Error> {
    let value = if excluded { json!("true") } else { serde_json::Value::Null };
    let patch = json!({"metadata": {"labels": {EXCLUDE_LABEL: value}}});
    w.nodes().patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await
}

async fn excluded_node(w: &World) -> TestResult {
    const NAME: &str = "dp-exclude";
    let nodes = real_nodes(w).await?;
    if nodes.len() < 2 {
        return Err(Verdict::Skipped(format!("needs two nodes that run pods; the cluster has {}", nodes.len())));
    }
    let nodes = &nodes[..];
    let excluded = nodes[0].metadata.name.clone().unwrap_or_default();
    // Local: a node's NodePort only reaches the pod on that node, so who answers tells which
    // node the load balancer sent the request to. A pod on every node, so that every node passes
    // the load balancer's health checks (if it makes any) and only the label takes one out.
    let service = w.for_cloud(service(NAME, false, json!({"externalTrafficPolicy": "Local"})));
    with_backend(w, NAME, service, nodes, |pods, ip| async move {
        let result = exclude(w, ip, &pods, &excluded).await;
        let restored = set_excluded(w, &excluded, false).await;
        result?;
        restored.map(|_| ()).map_err(Verdict::from)
    })
    .await
}

async fn exclude(w: &World, ip: IpAddr, pods: &[String], node: &str) -> TestResult {
    let seen = std::sync::Mutex::new(BTreeSet::new());
    let what = format!("requests through {ip}:80 to reach the pods on every node, {pods:?}");
    wait::until(&what, TIMEOUT, || async {
        let answer = hostname(w, ip).await;
        let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Ok(name) = answer {
            seen.insert(name);
        }
        if pods.iter().all(|p| seen.contains(p)) { Ok(()) } else { Err(format!("answered by {seen:?}")) }
    })
    .await?;
    set_excluded(w, node, true).await?;
    let (gone, kept) = (&pods[0], &pods[1..]);
    let after = format!("after node {node} (pod {gone}) was labelled {EXCLUDE_LABEL}");
    answered_in_a_row_by(w, ip, kept, &after).await
}

/// Waits until [`IN_A_ROW`] requests in a row through `ip` are answered, each by one of `pods`.
async fn answered_in_a_row_by(w: &World, ip: IpAddr, pods: &[String], when: &str) -> TestResult {
    let what = format!("{IN_A_ROW} requests in a row through {ip}:80 to be answered by {pods:?} only, {when}");
    wait::until(&what, TIMEOUT, || async {
        for _ in 0..IN_A_ROW {
            match hostname(w, ip).await {
                Ok(name) if pods.contains(&name) => {}
                Ok(name) => return Err(format!("answered by {name}")),
                Err(error) => return Err(error),
            }
        }
        Ok(())
    })
    .await
}

/// With `externalTrafficPolicy: Local` a node without an endpoint drops what reaches it, and
/// answers 503 on the service's `healthCheckNodePort`: a load balancer that health-checks its
/// backends answers every request, one that does not loses the share it sends to the other nodes.
/// One pod, on the last node.
async fn only_the_node_with_an_endpoint(w: &World) -> TestResult {
    const NAME: &str = "dp-local";
    let nodes = real_nodes(w).await?;
    if nodes.len() < 2 {
        return Err(Verdict::Skipped(format!("needs two nodes that run pods; the cluster has {}", nodes.len())));
    }
    let last = &nodes[nodes.len() - 1..];
    let service = w.for_cloud(service(NAME, false, json!({"externalTrafficPolicy": "Local"})));
    with_backend(w, NAME, service, last, |pods, ip| async move {
        answered_in_a_row_by(w, ip, &pods, "the only node with an endpoint being the last").await
    })
    .await
}
