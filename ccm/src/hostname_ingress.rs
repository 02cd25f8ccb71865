//! A cloud whose load balancers answer with a DNS name rather than an address, as AWS's ELB and NLB
//! do (the hidden `--testing-hostname-ingress DOMAIN` flag): each ingress IP `a.b.c.d` the inner
//! cloud gives becomes the host name `lb-a-b-c-d.DOMAIN`. It exists so tests can prove that
//! clients of such clouds (cloud-e2e's data-path tests) resolve the name and reach the load
//! balancer through it; the names resolve only where the test maps them (its own `/etc/hosts`).

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};

use crate::cloud::{CloudError, CloudProvider, InnerLoadBalancers, LoadBalancer, WithLoadBalancer};

/// `cloud`, its load balancers' ingress IPs given as host names under `domain` when there is one.
pub fn cloud_with(domain: Option<&str>, cloud: Arc<dyn CloudProvider>) -> Arc<dyn CloudProvider> {
    match domain {
        Some(domain) => {
            let inner = InnerLoadBalancers(cloud.clone());
            let named = HostnameIngress { inner, domain: domain.trim_matches('.').to_owned() };
            Arc::new(WithLoadBalancer { inner: cloud, load_balancer: named })
        }
        None => cloud,
    }
}

/// The host name standing for `ip` under `domain`: `10.250.1.7` → `lb-10-250-1-7.<domain>`.
pub fn host_name(ip: &str, domain: &str) -> String {
    format!("lb-{}.{domain}", ip.replace(['.', ':'], "-"))
}

struct HostnameIngress {
    inner: InnerLoadBalancers,
    domain: String,
}

impl HostnameIngress {
    /// `status` with every ingress IP as a host name, and no IP (as a DNS-named load balancer's).
    fn named(&self, mut status: LoadBalancerStatus) -> LoadBalancerStatus {
        for ingress in status.ingress.iter_mut().flatten() {
            if let Some(ip) = ingress.ip.take() {
                *ingress = LoadBalancerIngress { hostname: Some(host_name(&ip, &self.domain)), ..ingress.clone() };
            }
        }
        status
    }
}

#[async_trait]
impl LoadBalancer for HostnameIngress {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(Option<LoadBalancerStatus>, bool), CloudError> {
        let (status, exists) = self.inner.get()?.get_load_balancer(cluster_name, service).await?;
        Ok((status.map(|status| self.named(status)), exists))
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
        let status = self.inner.get()?.ensure_load_balancer(cluster_name, service, nodes).await?;
        Ok(self.named(status))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        self.inner.get()?.update_load_balancer(cluster_name, service, nodes).await
    }

    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<(), CloudError> {
        self.inner.get()?.ensure_load_balancer_deleted(cluster_name, service).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::{FakeCloud, LOAD_BALANCER_IP, service};

    #[tokio::test]
    async fn ingress_ips_become_host_names_and_every_call_reaches_the_inner_cloud() {
        let fake = Arc::new(FakeCloud::default());
        let cloud = cloud_with(Some("lb.test."), fake.clone());
        let lb = cloud.load_balancer().expect("the inner cloud's load balancers are offered");
        let web = service("web", &[], false);

        let status = lb.ensure_load_balancer("kubernetes", &web, &[]).await.unwrap();
        let expected = host_name(LOAD_BALANCER_IP, "lb.test");
        let ingress = &status.ingress.unwrap()[0];
        assert_eq!((ingress.hostname.as_deref(), ingress.ip.as_deref()), (Some(expected.as_str()), None));
        let (got, exists) = lb.get_load_balancer("kubernetes", &web).await.unwrap();
        assert!(exists);
        assert_eq!(got.unwrap().ingress.unwrap()[0].hostname.as_deref(), Some(expected.as_str()));
        lb.ensure_load_balancer_deleted("kubernetes", &web).await.unwrap();
        assert_eq!(fake.calls().len(), 3, "{:?}", fake.calls());
        assert_eq!(host_name("10.250.1.7", "lb.test"), "lb-10-250-1-7.lb.test");

        let plain = cloud_with(None, fake.clone());
        let status = plain.load_balancer().unwrap().ensure_load_balancer("kubernetes", &web, &[]).await.unwrap();
        assert_eq!(status.ingress.unwrap()[0].ip.as_deref(), Some(LOAD_BALANCER_IP), "no domain: untouched");
    }
}
