//! The cluster DNS of a cluster with real nodes: CoreDNS running as pods (the toolchain's CoreDNS
//! in an image built here, [`super::images::COREDNS`]) behind the `kube-dns` Service at
//! [`DNS_IP`], with the RBAC and Corefile kubeadm gives it. It answers for `cluster.local` only:
//! nothing is forwarded, since nothing beyond the cluster's namespaces is reachable anyway.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{ClusterError, Result};

/// The `kube-dns` Service's address (kubelet's `clusterDNS`).
pub const DNS_IP: &str = "10.96.0.10";
const NAMESPACE: &str = "kube-system";
const NAME: &str = "coredns";

const COREFILE: &str = ".:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    cache 30
    loop
    reload
    loadbalance
}
";

async fn create<K>(api: Api<K>, cluster: &str, object: serde_json::Value) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).expect("a valid object");
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(ClusterError::Kube { cluster: cluster.into(), source }),
    }
}

/// Creates CoreDNS's objects (`image` its image) and, with `wait`, waits until its pods are ready.
pub async fn deploy(client: &Client, cluster: &str, image: &str, replicas: i32, wait: bool) -> Result<()> {
    create(
        Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE),
        cluster,
        json!({"metadata": {"name": NAME, "namespace": NAMESPACE}}),
    )
    .await?;
    create(Api::<ClusterRole>::all(client.clone()), cluster, json!({
        "metadata": {"name": "system:coredns"},
        "rules": [
            {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    }))
    .await?;
    create(
        Api::<ClusterRoleBinding>::all(client.clone()),
        cluster,
        json!({
            "metadata": {"name": "system:coredns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
        }),
    )
    .await?;
    create(
        Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE),
        cluster,
        json!({
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "data": {"Corefile": COREFILE},
        }),
    )
    .await?;
    let labels = json!({"k8s-app": "kube-dns"});
    create(
        Api::<Deployment>::namespaced(client.clone(), NAMESPACE),
        cluster,
        json!({
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": NAME,
                        "priorityClassName": "system-cluster-critical",
                        "dnsPolicy": "Default",
                        "containers": [{
                            "name": "coredns",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "args": ["-conf", "/etc/coredns/Corefile"],
                            "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": true}],
                            "ports": [
                                {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                                {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                                {"name": "metrics", "containerPort": 9153, "protocol": "TCP"},
                            ],
                            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
                            "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}, "initialDelaySeconds": 10},
                            "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "170Mi"}},
                            "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}},
                        }],
                        "volumes": [{"name": "config", "configMap": {"name": NAME}}],
                    },
                },
            },
        }),
    )
    .await?;
    create(
        Api::<Service>::namespaced(client.clone(), NAMESPACE),
        cluster,
        json!({
            "metadata": {"name": "kube-dns", "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "selector": labels,
                "clusterIP": DNS_IP,
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                    {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153},
                ],
            },
        }),
    )
    .await?;
    if wait { wait_ready(client, cluster, replicas).await } else { Ok(()) }
}

async fn wait_ready(client: &Client, cluster: &str, replicas: i32) -> Result<()> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let started = Instant::now();
    loop {
        let deployment =
            api.get(NAME).await.map_err(|source| ClusterError::Kube { cluster: cluster.into(), source })?;
        let ready = deployment.status.and_then(|s| s.ready_replicas).unwrap_or(0);
        if ready >= replicas {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err(ClusterError::RealNodes(format!(
                "CoreDNS did not become ready in {:?} ({ready} of {replicas} pods ready); see `kubectl -n {NAMESPACE} describe deployment {NAME}`",
                started.elapsed()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
