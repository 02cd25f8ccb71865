//! The service controller: load balancers for `type: LoadBalancer` services.
//!
//! What the cloud did is seen through the service (ingress, finalizer, events) and, when the
//! provider declares a `list_load_balancers` hook, through the cloud's own listing: an entry of
//! the listing (a JSON array item or a line) belongs to a service when it contains the service's
//! load balancer name (upstream's default, `a` + the UID without dashes, cut to 32 bytes) or its
//! `namespace/name`.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::hooks::{HookKind, load_balancer_entries};
use super::{Test, TestResult, Verdict, World, fail, wait};
use config::Capability;

const LB_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a service the CCM must leave alone is watched.
const IGNORED_WINDOW: Duration = Duration::from_secs(10);
const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// A class no controller implements: the CCM must leave such a service alone.
const FOREIGN_CLASS: &str = "cloud-e2e.example.com/nobody";
/// Documentation ranges (RFC 5737): never a real client.
const SOURCE_RANGES: [&str; 2] = ["203.0.113.0/24", "198.51.100.0/24"];

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancer] Service of type LoadBalancer should get an ingress address and a cleanup finalizer",
            &[Capability::LoadBalancers],
            |w| ingress_and_finalizer(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancer] Service of type LoadBalancer should have its load balancer deleted and its finalizer removed when deleted",
            &[Capability::LoadBalancers],
            |w| deleted_with_the_service(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancer] Service changed from LoadBalancer to ClusterIP should have its load balancer deleted",
            &[Capability::LoadBalancers],
            |w| released_on_type_change(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancer] Service of type LoadBalancer with another loadBalancerClass should be left alone",
            &[Capability::LoadBalancers],
            |w| foreign_class_ignored(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancerUDP] Service of type LoadBalancer with a UDP port should get an ingress address",
            &[Capability::LoadBalancers, Capability::LoadBalancerUdp],
            |w| udp(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancerSourceRanges] Service of type LoadBalancer should apply its loadBalancerSourceRanges and their changes",
            &[Capability::LoadBalancers, Capability::LoadBalancerSourceRanges],
            |w| source_ranges(w).boxed(),
        )
        .using(&[HookKind::ListLoadBalancers]),
        Test::new(
            "[cloud-e2e] [Feature:LoadBalancerNodeExclusion] Service of type LoadBalancer should update its backends when a node is excluded and included again",
            &[Capability::LoadBalancers, Capability::LoadBalancerNodeExclusion],
            |w| node_exclusion(w).boxed(),
        )
        .serial(),
    ]
}

fn services(w: &World) -> Api<Service> {
    Api::namespaced(w.client.clone(), &w.namespace)
}

fn key(w: &World, name: &str) -> String {
    format!("{}/{name}", w.namespace)
}

/// The ingress points (IPs or host names) of the service's status.
pub fn ingress(service: &Service) -> Vec<String> {
    let status = service.status.as_ref().and_then(|s| s.load_balancer.as_ref());
    let points = status.and_then(|lb| lb.ingress.clone()).unwrap_or_default();
    points.into_iter().filter_map(|i| i.ip.or(i.hostname)).collect()
}

fn finalizers(service: &Service) -> Vec<String> {
    service.metadata.finalizers.clone().unwrap_or_default()
}

fn load_balancer_service(name: &str, extra_spec: serde_json::Value) -> Service {
    let mut spec = json!({
        "type": "LoadBalancer",
        "selector": {"app": name},
        "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}],
    });
    if let (Some(spec), serde_json::Value::Object(extra)) = (spec.as_object_mut(), extra_spec) {
        spec.extend(extra);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": name}}, "spec": spec}))
        .expect("a valid Service")
}

/// Creates the service, runs `body` on it, and deletes it whatever happened.
async fn with_service<'a, F>(w: &'a World, service: Service, body: impl FnOnce(Service) -> F) -> TestResult
where
    F: Future<Output = TestResult> + 'a,
{
    let name = service.metadata.name.clone().unwrap_or_default();
    let created = services(w).create(&PostParams::default(), &service).await?;
    let result = body(created).await;
    cleanup(w, &name).await;
    result
}

/// Deletes a service of the test, and drops the finalizer itself if the CCM has not let go of it
/// within a minute (so the namespace can go; the test has failed by then anyway).
async fn cleanup(w: &World, name: &str) {
    let api = services(w);
    let _ = api.delete(name, &DeleteParams::default()).await;
    let gone = wait::until("", Duration::from_secs(60), || async {
        match api.get_opt(name).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    if gone.is_err() {
        tracing::warn!("cloud-e2e: service {}/{name} kept its finalizer; removing it", w.namespace);
        let patch = json!({"metadata": {"finalizers": null}});
        let _ = api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await;
    }
}

async fn wait_for_ingress(w: &World, name: &str) -> Result<Service, Verdict> {
    let api = services(w);
    let what = format!("an ingress address in the status of service {}", key(w, name));
    wait::until(&what, LB_TIMEOUT, || async {
        let service = api.get(name).await.map_err(|e| e.to_string())?;
        if ingress(&service).is_empty() {
            Err(format!(
                "status.loadBalancer {:?}; events: {}",
                service.status.and_then(|s| s.load_balancer),
                events(w, name).await
            ))
        } else {
            Ok(service)
        }
    })
    .await
}

/// The service's events as `reason: message` lines, newest last (for failure messages).
async fn events(w: &World, name: &str) -> String {
    let list = list_events(w, name).await;
    let lines: Vec<String> = list
        .iter()
        .map(|e| format!("{} ({})", e.reason.as_deref().unwrap_or("-"), e.message.as_deref().unwrap_or("-")))
        .collect();
    if lines.is_empty() { "none".into() } else { lines.join("; ") }
}

async fn list_events(w: &World, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(w.client.clone(), &w.namespace);
    let params = ListParams::default().fields(&format!("involvedObject.kind=Service,involvedObject.name={name}"));
    api.list(&params).await.map(|l| l.items).unwrap_or_default()
}

/// Identities of the service's events with `reason` (an event's resourceVersion moves when its
/// count does, so a repeat shows as a new identity).
async fn event_ids(w: &World, name: &str, reason: &str) -> BTreeSet<(String, String)> {
    let list = list_events(w, name).await;
    list.into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| (e.metadata.uid.unwrap_or_default(), e.metadata.resource_version.unwrap_or_default()))
        .collect()
}

/// The name upstream's `cloudprovider.DefaultLoadBalancerName` gives a service's load balancer,
/// which clouds name theirs after: `a` + the service's UID without dashes, cut to 32 bytes. (The
/// suite tests CCMs as processes and does not link the CCM library, which has its own copy.)
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let mut name = format!("a{}", uid.replace('-', ""));
    while name.len() > 32 {
        name.pop();
    }
    name
}

/// Whether a `list_load_balancers` entry is the service's load balancer.
pub fn belongs(entry: &str, service: &Service) -> bool {
    let lb_name = default_load_balancer_name(service);
    if lb_name.len() > 1 && entry.contains(&lb_name) {
        return true;
    }
    let key = format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    );
    let boundary = |c: Option<char>| c.is_none_or(|c| !(c.is_ascii_alphanumeric() || "./-_".contains(c)));
    entry
        .match_indices(&key)
        .any(|(at, _)| boundary(entry[..at].chars().next_back()) && boundary(entry[at + key.len()..].chars().next()))
}

/// The cloud's entry for the service, through the `list_load_balancers` hook; `Ok(None)` when the
/// cloud lists none; `Err` when the hook failed (which fails the test).
async fn cloud_entry(w: &World, service: &Service) -> Result<Option<String>, String> {
    let listing = w.hooks.run(HookKind::ListLoadBalancers, None).await?;
    Ok(load_balancer_entries(&listing).into_iter().find(|entry| belongs(entry, service)))
}

/// A hook failure is not a state to wait out: it fails the test at once.
fn hook_failed(error: String) -> Verdict {
    Verdict::Failed(error)
}

async fn wait_listed(w: &World, service: &Service) -> Result<String, Verdict> {
    let key = key(w, service.metadata.name.as_deref().unwrap_or_default());
    let lb_name = default_load_balancer_name(service);
    let what = format!("the cloud to list a load balancer for service {key}");
    wait::until(&what, LB_TIMEOUT, || async {
        match cloud_entry(w, service).await {
            Ok(Some(entry)) => Ok(Ok(entry)),
            Ok(None) => Err(format!("no entry with {lb_name} or {key}")),
            Err(error) => Ok(Err(hook_failed(error))),
        }
    })
    .await?
}

async fn ingress_and_finalizer(w: &World) -> TestResult {
    let service = w.for_cloud(load_balancer_service("lb-basic", json!({})));
    with_service(w, service, |_| async move {
        let service = wait_for_ingress(w, "lb-basic").await?;
        if !finalizers(&service).iter().any(|f| f == FINALIZER) {
            return fail(format!(
                "service {} has ingress {:?} but not the finalizer {FINALIZER} (finalizers {:?})",
                key(w, "lb-basic"),
                ingress(&service),
                finalizers(&service)
            ));
        }
        let what = "the events EnsuringLoadBalancer and EnsuredLoadBalancer on the service";
        wait::until(what, Duration::from_secs(30), || async {
            let ensuring = event_ids(w, "lb-basic", "EnsuringLoadBalancer").await;
            let ensured = event_ids(w, "lb-basic", "EnsuredLoadBalancer").await;
            if !ensuring.is_empty() && !ensured.is_empty() { Ok(()) } else { Err(events(w, "lb-basic").await) }
        })
        .await
    })
    .await
}

async fn deleted_with_the_service(w: &World) -> TestResult {
    const NAME: &str = "lb-delete";
    let service = w.for_cloud(load_balancer_service(NAME, json!({})));
    with_service(w, service, |_| async move {
        let service = wait_for_ingress(w, NAME).await?;
        let listed = w.hooks.has(HookKind::ListLoadBalancers);
        if listed {
            wait_listed(w, &service).await?;
        }
        services(w).delete(NAME, &DeleteParams::default()).await?;
        let what = format!(
            "service {} to be gone (the CCM removes {FINALIZER} once the load balancer is deleted)",
            key(w, NAME)
        );
        wait::until(&what, LB_TIMEOUT, || async {
            match services(w).get_opt(NAME).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(s) => {
                    Err(format!("still there with finalizers {:?}; events: {}", finalizers(&s), events(w, NAME).await))
                }
            }
        })
        .await?;
        if listed {
            wait_unlisted(w, &service, "the service was deleted").await?;
        }
        Ok(())
    })
    .await
}

async fn wait_unlisted(w: &World, service: &Service, after: &str) -> TestResult {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let what = format!("the cloud to stop listing the load balancer of service {} after {after}", key(w, name));
    wait::until(&what, Duration::from_secs(60), || async {
        match cloud_entry(w, service).await {
            Ok(None) => Ok(Ok(())),
            Ok(Some(entry)) => Err(format!("the cloud still lists {entry}")),
            Err(error) => Ok(Err(hook_failed(error))),
        }
    })
    .await?
}

async fn released_on_type_change(w: &World) -> TestResult {
    const NAME: &str = "lb-to-clusterip";
    let service = w.for_cloud(load_balancer_service(NAME, json!({})));
    with_service(w, service, |_| async move {
        let service = wait_for_ingress(w, NAME).await?;
        let listed = w.hooks.has(HookKind::ListLoadBalancers);
        if listed {
            wait_listed(w, &service).await?;
        }
        let patch = json!({"spec": {"type": "ClusterIP"}});
        services(w).patch(NAME, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        let what = format!("service {} to lose its ingress and {FINALIZER} after becoming ClusterIP", key(w, NAME));
        wait::until(&what, LB_TIMEOUT, || async {
            let now = services(w).get(NAME).await.map_err(|e| e.to_string())?;
            if ingress(&now).is_empty() && !finalizers(&now).iter().any(|f| f == FINALIZER) {
                Ok(())
            } else {
                Err(format!(
                    "ingress {:?}, finalizers {:?}; events: {}",
                    ingress(&now),
                    finalizers(&now),
                    events(w, NAME).await
                ))
            }
        })
        .await?;
        if listed {
            wait_unlisted(w, &service, "the service became ClusterIP").await?;
        }
        Ok(())
    })
    .await
}

async fn foreign_class_ignored(w: &World) -> TestResult {
    const NAME: &str = "lb-foreign-class";
    let service = w.for_cloud(load_balancer_service(NAME, json!({"loadBalancerClass": FOREIGN_CLASS})));
    with_service(w, service, |_| async move {
        let what = format!(
            "the CCM to leave service {} (loadBalancerClass {FOREIGN_CLASS}) alone for {}s: no finalizer, no ingress, no events",
            key(w, NAME),
            IGNORED_WINDOW.as_secs()
        );
        wait::holds(&what, IGNORED_WINDOW, || async {
            let now = services(w).get(NAME).await.map_err(|e| e.to_string())?;
            let seen = list_events(w, NAME).await;
            if finalizers(&now).iter().any(|f| f == FINALIZER) || !ingress(&now).is_empty() || !seen.is_empty() {
                Err(format!("finalizers {:?}, ingress {:?}, events: {}", finalizers(&now), ingress(&now), events(w, NAME).await))
            } else {
                Ok(())
            }
        })
        .await
    })
    .await
}

async fn udp(w: &World) -> TestResult {
    const NAME: &str = "lb-udp";
    let ports = json!({"ports": [{"name": "dns", "protocol": "UDP", "port": 53, "targetPort": 5353}]});
    with_service(w, w.for_cloud(load_balancer_service(NAME, ports)), |_| async move {
        wait_for_ingress(w, NAME).await.map(|_| ())
    })
    .await
}

async fn source_ranges(w: &World) -> TestResult {
    const NAME: &str = "lb-source-ranges";
    let [first, second] = SOURCE_RANGES;
    let service = w.for_cloud(load_balancer_service(NAME, json!({"loadBalancerSourceRanges": [first]})));
    with_service(w, service, |_| async move {
        let service = wait_for_ingress(w, NAME).await?;
        wait_for_ranges(w, &service, &[first], &[]).await?;
        let patch = json!({"spec": {"loadBalancerSourceRanges": [second]}});
        services(w).patch(NAME, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        wait_for_ranges(w, &service, &[second], &[first]).await
    })
    .await
}

/// Waits until the cloud's entry for the service shows every range of `present` and none of `absent`.
async fn wait_for_ranges(w: &World, service: &Service, present: &[&str], absent: &[&str]) -> TestResult {
    let what = format!(
        "the cloud's load balancer of service {} to allow {present:?}{}",
        key(w, service.metadata.name.as_deref().unwrap_or_default()),
        if absent.is_empty() { String::new() } else { format!(" and no longer {absent:?}") }
    );
    wait::until(&what, LB_TIMEOUT, || async {
        match cloud_entry(w, service).await {
            Ok(Some(entry))
                if present.iter().all(|r| entry.contains(r)) && !absent.iter().any(|r| entry.contains(r)) =>
            {
                Ok(Ok(()))
            }
            Ok(Some(entry)) => Err(format!("the cloud lists {entry}")),
            Ok(None) => Err("the cloud lists no load balancer for it".into()),
            Err(error) => Ok(Err(hook_failed(error))),
        }
    })
    .await?
}

async fn set_excluded(w: &World, node: &str, excluded: bool) -> Result<Node, kube::Error> {
    let value = if excluded { json!("true") } else { serde_json::Value::Null };
    let patch = json!({"metadata": {"labels": {EXCLUDE_LABEL: value}}});
    w.nodes().patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await
}

async fn node_exclusion(w: &World) -> TestResult {
    const NAME: &str = "lb-node-exclusion";
    let workers = w.workers().await?;
    let node = workers[0].metadata.name.clone().unwrap_or_default();
    with_service(w, w.for_cloud(load_balancer_service(NAME, json!({}))), |_| async {
        let result = exclude_and_include(w, NAME, &node).await;
        // Whatever happened, the node is a backend again afterwards.
        let restored = set_excluded(w, &node, false).await;
        result?;
        restored.map(|_| ()).map_err(Verdict::from)
    })
    .await
}

async fn exclude_and_include(w: &World, name: &str, node: &str) -> TestResult {
    let service = wait_for_ingress(w, name).await?;
    // With a listing that names nodes, also check the cloud's backend set itself.
    let names_nodes = match w.hooks.has(HookKind::ListLoadBalancers) {
        true => wait_listed(w, &service).await?.contains(node),
        false => false,
    };
    for (excluded, change) in [(true, "labelled"), (false, "unlabelled")] {
        let before = event_ids(w, name, "UpdatedLoadBalancer").await;
        set_excluded(w, node, excluded).await?;
        let what = format!(
            "an UpdatedLoadBalancer event on service {} after node {node} was {change} {EXCLUDE_LABEL}",
            key(w, name)
        );
        wait::until(&what, LB_TIMEOUT, || async {
            let now = event_ids(w, name, "UpdatedLoadBalancer").await;
            if now.difference(&before).next().is_some() { Ok(()) } else { Err(events(w, name).await) }
        })
        .await?;
        if names_nodes {
            let what = format!(
                "the cloud's load balancer of service {} to {} node {node}",
                key(w, name),
                if excluded { "drop" } else { "include" }
            );
            wait::until(&what, LB_TIMEOUT, || async {
                match cloud_entry(w, &service).await {
                    Ok(Some(entry)) if entry.contains(node) != excluded => Ok(Ok(())),
                    Ok(entry) => Err(format!("the cloud lists {entry:?}")),
                    Err(error) => Ok(Err(hook_failed(error))),
                }
            })
            .await??;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(namespace: &str, name: &str, uid: &str) -> Service {
        serde_json::from_value(json!({"metadata": {"namespace": namespace, "name": name, "uid": uid}})).unwrap()
    }

    #[test]
    fn an_entry_belongs_to_a_service_by_its_load_balancer_name_or_its_key() {
        let web = service("ns", "web", "6f2a1c3e-8b4d-4e7f-9a0b-1c2d3e4f5a6b");
        assert!(belongs(r#"{"name":"a6f2a1c3e8b4d4e7f9a0b1c2d3e4f5a6","service":"other/x"}"#, &web));
        assert!(belongs(r#"{"name":"k8s-lb-1","service":"ns/web"}"#, &web));
        assert!(belongs("lb-1  ns/web  10.0.0.1", &web));
        assert!(!belongs(r#"{"name":"k8s-lb-2","service":"ns/web2"}"#, &web), "ns/web2 is another service");
        assert!(!belongs("lb-3 xns/web", &web));
        assert!(!belongs("lb-4 ns/other", &web));
    }

    #[test]
    fn ingress_reads_ips_and_host_names() {
        let svc: Service = serde_json::from_value(json!({"status": {"loadBalancer": {"ingress": [
            {"ip": "127.200.0.1"}, {"hostname": "lb.example.com"}
        ]}}}))
        .unwrap();
        assert_eq!(ingress(&svc), ["127.200.0.1", "lb.example.com"]);
        assert!(ingress(&Service::default()).is_empty());
    }
}
