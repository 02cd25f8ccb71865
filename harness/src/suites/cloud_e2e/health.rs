//! The CCM itself: leader election on the Lease `kube-system/cloud-controller-manager`, and `/healthz`.
//!
//! A CCM running outside the cluster (a process of the local deployer) is reached at the URL the
//! run gives; one running as a pod is found by its leader Lease (the holder identity starts with
//! the pod's host name) and reached through the API server's pod proxy on port 10258.

use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::{Test, TestResult, Verdict, World, wait};

const LEASE_NAMESPACE: &str = "kube-system";
const LEASE_NAME: &str = "cloud-controller-manager";
/// Upstream's `--secure-port` default.
const CCM_SECURE_PORT: u16 = 10258;

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "[cloud-e2e] [Feature:CCM] The CCM should hold and renew the leader Lease kube-system/cloud-controller-manager",
            &[],
            |w| leader_lease(w).boxed(),
        ),
        Test::new("[cloud-e2e] [Feature:CCM] The CCM should answer /healthz with 200", &[], |w| healthz(w).boxed()),
    ]
}

fn holder(lease: &Lease) -> (String, Option<String>, i32) {
    let spec = lease.spec.clone().unwrap_or_default();
    let renewed = spec.renew_time.map(|t| t.0.to_string());
    (spec.holder_identity.unwrap_or_default(), renewed, spec.lease_duration_seconds.unwrap_or(15))
}

async fn get_lease(w: &World) -> Result<Lease, String> {
    let leases: Api<Lease> = Api::namespaced(w.client.clone(), LEASE_NAMESPACE);
    leases.get(LEASE_NAME).await.map_err(|e| format!("Lease {LEASE_NAMESPACE}/{LEASE_NAME}: {e}"))
}

async fn leader_lease(w: &World) -> TestResult {
    let what = format!("a holder of the Lease {LEASE_NAMESPACE}/{LEASE_NAME}");
    let lease = wait::until(&what, Duration::from_secs(60), || async {
        let lease = get_lease(w).await?;
        let (identity, renewed, _) = holder(&lease);
        if identity.is_empty() || renewed.is_none() {
            Err(format!("holder {identity:?}, renewed {renewed:?}"))
        } else {
            Ok(lease)
        }
    })
    .await?;
    let (identity, first_renewal, duration) = holder(&lease);
    // A leader renews well within its lease duration.
    let window = Duration::from_secs(2 * duration.max(1) as u64 + 5);
    let what =
        format!("{identity} to renew the Lease (renewTime {} at first)", first_renewal.as_deref().unwrap_or("-"));
    wait::until(&what, window, || async {
        let (now_identity, renewed, _) = holder(&get_lease(w).await?);
        if renewed != first_renewal { Ok(()) } else { Err(format!("holder {now_identity:?}, renewTime {renewed:?}")) }
    })
    .await
}

async fn healthz(w: &World) -> TestResult {
    if let Some(url) = &w.ccm_healthz_url {
        return wait::until(&format!("200 from {url}"), Duration::from_secs(30), || http_healthz(url)).await;
    }
    let Some(pod) = leader_pod(w).await? else {
        return Err(Verdict::Skipped(
            "the CCM runs outside the cluster (no pod matches its Lease holder) and no /healthz URL was given \
             (harness suite cloud-e2e --ccm-healthz-url)"
                .into(),
        ));
    };
    let path = format!("/api/v1/namespaces/{LEASE_NAMESPACE}/pods/https:{pod}:{CCM_SECURE_PORT}/proxy/healthz");
    let request = http::Request::get(&path).body(Vec::new()).expect("a valid request");
    let what = format!("200 from /healthz of pod {LEASE_NAMESPACE}/{pod} through the API server's proxy");
    wait::until(&what, Duration::from_secs(30), || async {
        w.client.request_text(request.clone()).await.map(|_| ()).map_err(|e| e.to_string())
    })
    .await
}

/// The pod of the Lease holder, when the CCM runs in the cluster: upstream's identity is
/// `<hostname>_<uuid>`, and a pod's host name is its name.
async fn leader_pod(w: &World) -> Result<Option<String>, Verdict> {
    let (identity, _, _) = holder(&get_lease(w).await.map_err(Verdict::Failed)?);
    let host = identity.split('_').next().unwrap_or_default().to_owned();
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), LEASE_NAMESPACE);
    let names = pods.list(&ListParams::default()).await?.items.into_iter().filter_map(|p| p.metadata.name);
    Ok(names.into_iter().find(|name| !host.is_empty() && *name == host))
}

async fn http_healthz(url: &str) -> Result<(), String> {
    // Upstream serves HTTPS with a self-signed certificate; the reference CCM serves plain HTTP.
    // The URL a run derives from `--secure-port` says `http://`: when the port speaks TLS (Go
    // answers a plain request with a 400 saying so), the same URL is asked over HTTPS.
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    let get = |url: String| {
        let client = client.clone();
        async move {
            let response = client.get(&url).send().await.map_err(|e| format!("GET {url}: {e}"))?;
            let status = response.status();
            Ok::<_, String>((status, response.text().await.unwrap_or_default()))
        }
    };
    let (mut status, mut body) = get(url.to_owned()).await?;
    if let Some(rest) = url.strip_prefix("http://").filter(|_| speaks_tls(status, &body)) {
        (status, body) = get(format!("https://{rest}")).await?;
    }
    if status.is_success() { Ok(()) } else { Err(format!("{status}: {}", body.trim())) }
}

/// Go's answer to a plain HTTP request on a TLS port.
fn speaks_tls(status: reqwest::StatusCode, body: &str) -> bool {
    status == reqwest::StatusCode::BAD_REQUEST && body.contains("HTTP request to an HTTPS server")
}
