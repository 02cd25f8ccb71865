//! Deliberate bugs the reference CCM can be started with (the hidden `--testing-bugs` flag).
//!
//! They exist only so tests can prove the cloud-e2e suite catches a broken CCM: a CCM built from
//! this one with a bug on must fail the suite. Never turn one on for anything else.
//!
//! The controllers know nothing of them: [`app::run`](crate::app::run) wires them in from here,
//! [`Bug::LeakLoadBalancers`] as a decorator of the cloud ([`cloud_with`]) and
//! [`Bug::KeepShutdownTaint`] as the decision cloud-node-lifecycle acts on ([`lifecycle_decision`]).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use clap::ValueEnum;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};

use crate::cloud::{CloudError, CloudProvider, InnerLoadBalancers, LoadBalancer, WithLoadBalancer};
use crate::controllers::node_lifecycle::{Decide, Verdict, decide};
use crate::controllers::service::key;

/// One deliberate defect, named on the command line in kebab case (`keep-shutdown-taint`).
///
/// It exists only so tests can prove the cloud-e2e suite catches a broken CCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum Bug {
    /// cloud-node-lifecycle still adds `node.cloudprovider.kubernetes.io/shutdown` but never removes
    /// it from a node that is Ready again.
    KeepShutdownTaint,
    /// The service controller skips the cloud's `ensure_load_balancer_deleted` yet behaves as if it
    /// succeeded (events, finalizer removal), so the cloud keeps the load balancer.
    LeakLoadBalancers,
}

impl Bug {
    /// The name `--testing-bugs` takes, e.g. `keep-shutdown-taint`.
    pub fn name(self) -> &'static str {
        match self {
            Bug::KeepShutdownTaint => "keep-shutdown-taint",
            Bug::LeakLoadBalancers => "leak-load-balancers",
        }
    }
}

impl fmt::Display for Bug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The bugs a CCM runs with; empty (the default) for a correct CCM.
pub type Bugs = BTreeSet<Bug>;

/// The cloud the controllers of a CCM running with `bugs` see.
pub fn cloud_with(bugs: &Bugs, cloud: Arc<dyn CloudProvider>) -> Arc<dyn CloudProvider> {
    match bugs.contains(&Bug::LeakLoadBalancers) {
        true => {
            let leaking = LeakingLoadBalancers { inner: InnerLoadBalancers(cloud.clone()) };
            Arc::new(WithLoadBalancer { inner: cloud, load_balancer: leaking })
        }
        false => cloud,
    }
}

/// The decision cloud-node-lifecycle acts on in a CCM running with `bugs`.
pub fn lifecycle_decision(bugs: &Bugs) -> Decide {
    match bugs.contains(&Bug::KeepShutdownTaint) {
        true => keep_shutdown_taint,
        false => decide,
    }
}

/// [`decide`] with [`Bug::KeepShutdownTaint`]: the shutdown taint is never removed (it is still added).
fn keep_shutdown_taint(ready: bool, tainted: bool, shutdown: Option<bool>, exists: Option<bool>) -> Verdict {
    match decide(ready, tainted, shutdown, exists) {
        Verdict::RemoveShutdownTaint => Verdict::Nothing,
        verdict => verdict,
    }
}

/// The cloud with [`Bug::LeakLoadBalancers`]: deleting a load balancer succeeds without asking the
/// cloud; everything else is the inner cloud's.
struct LeakingLoadBalancers {
    inner: InnerLoadBalancers,
}

#[async_trait]
impl LoadBalancer for LeakingLoadBalancers {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(Option<LoadBalancerStatus>, bool), CloudError> {
        self.inner.get()?.get_load_balancer(cluster_name, service).await
    }

    fn get_load_balancer_name(&self, cluster_name: &str, service: &Service) -> String {
        self.inner.name(cluster_name, service)
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        self.inner.get()?.ensure_load_balancer(cluster_name, service, nodes).await
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        self.inner.get()?.update_load_balancer(cluster_name, service, nodes).await
    }

    async fn ensure_load_balancer_deleted(&self, _cluster_name: &str, service: &Service) -> Result<(), CloudError> {
        tracing::warn!(service = %key(service), "testing bug {}: not deleting the load balancer", Bug::LeakLoadBalancers);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::{FakeCloud, service};

    #[test]
    fn names_are_the_command_line_values() {
        for bug in Bug::value_variants() {
            assert_eq!(bug.to_possible_value().unwrap().get_name(), bug.name());
            assert_eq!(<Bug as ValueEnum>::from_str(bug.name(), false), Ok(*bug));
        }
    }

    fn verdicts(decide: Decide) -> [Verdict; 3] {
        [
            decide(true, true, None, None),
            decide(false, false, Some(true), None),
            decide(false, false, Some(false), Some(false)),
        ]
    }

    #[test]
    fn keep_shutdown_taint_only_stops_the_removal() {
        let buggy = lifecycle_decision(&Bugs::from([Bug::KeepShutdownTaint]));
        assert_eq!(verdicts(buggy), [Verdict::Nothing, Verdict::AddShutdownTaint, Verdict::Delete]);
        // Another bug, or none, leaves the decision alone.
        let correct = [Verdict::RemoveShutdownTaint, Verdict::AddShutdownTaint, Verdict::Delete];
        assert_eq!(verdicts(lifecycle_decision(&Bugs::from([Bug::LeakLoadBalancers]))), correct);
        assert_eq!(verdicts(lifecycle_decision(&Bugs::new())), correct);
    }

    #[tokio::test]
    async fn leak_load_balancers_skips_only_the_clouds_deletion() {
        let fake = Arc::new(FakeCloud::default());
        let cloud = cloud_with(&Bugs::from([Bug::LeakLoadBalancers]), fake.clone());
        let lb = cloud.load_balancer().expect("the inner cloud's load balancers are offered");
        let web = service("web", &[], false);

        lb.ensure_load_balancer("kubernetes", &web, &[]).await.unwrap();
        lb.update_load_balancer("kubernetes", &web, &[]).await.unwrap();
        lb.get_load_balancer("kubernetes", &web).await.unwrap();
        lb.ensure_load_balancer_deleted("kubernetes", &web).await.expect("deleting seems to succeed");

        assert_eq!(
            fake.calls(),
            [
                "ensure_load_balancer default/web nodes=[]",
                "update_load_balancer default/web nodes=[]",
                "get_load_balancer default/web"
            ]
        );
        assert!(cloud.instances_v2().is_some() && cloud.routes().is_some(), "the rest is the inner cloud's");
        assert_eq!(cloud.provider_name(), fake.provider_name());
    }

    #[tokio::test]
    async fn without_the_bug_the_cloud_is_untouched() {
        let fake = Arc::new(FakeCloud::default());
        let cloud = cloud_with(&Bugs::from([Bug::KeepShutdownTaint]), fake.clone());
        let web = service("web", &[], false);
        cloud.load_balancer().unwrap().ensure_load_balancer_deleted("kubernetes", &web).await.unwrap();
        assert_eq!(fake.calls(), ["ensure_load_balancer_deleted default/web"]);
    }
}
