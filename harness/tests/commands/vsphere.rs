//! `harness run --provider vsphere` for real, on both pinned Kubernetes versions: cloud-provider-
//! vsphere's CCM v1.36.0 (built by `harness toolchain install --all`; against Kubernetes 1.37 it is
//! one minor behind) against vcsim, on real nodes. Besides cloud-e2e's own verdicts, exec suites
//! around it dump the nodes and the cluster's record of its VMs, so the test checks the vSphere
//! shapes themselves: `vsphere://<the VM's UUID>` providerIDs, the VM's UUID as each node's
//! systemUUID (as Linux on a VM shows it), the VM's address, instance type and zone, and the
//! destroyed VM's node gone. And a CCM that vcsim refuses to log in stops the wait with its own error.
//!
//! conformance-quick on these nodes is the provider's second required suite; it is left to
//! `harness run --provider vsphere` and the matrix (docs/benchmarks.md), not run here, for CI's time.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use super::provider_run::CheckedRun;
use local_cluster::clouds::vcsim as vsphere;

fn run(version: &str) {
    let run = CheckedRun::cloud_e2e("vsphere", version, "vs-e2e");
    // Load balancers and routes are NSX-T's: skipped, with the reason in the report.
    run.assert_skipped(&["[Feature:LoadBalancer]", "[Feature:Routes]", "[Feature:LoadBalancerDataPath]"]);
    assert!(run.report.contains("which vcsim does not simulate"), "the skips say why");

    // The nodes as the CCM left them, against vcsim's VMs.
    let cluster = run.read("cluster-before.json");
    assert_eq!(cluster["cloud"]["kind"], "vcsim", "cluster.json tags its cloud: {cluster}");
    let vms: BTreeMap<String, String> = serde_json::from_value(cluster["cloud"]["vms"].clone()).unwrap();
    let zones: BTreeMap<String, String> = serde_json::from_value(cluster["cloud"]["zones"].clone()).unwrap();
    assert_eq!(vms.len(), 3, "{cluster}");
    let mut seen_zones = std::collections::BTreeSet::new();
    for (index, node) in run.nodes_before_and_after(3).iter().enumerate() {
        let name = node["metadata"]["name"].as_str().unwrap();
        let uuid = &vms[name];
        assert_eq!(node["spec"]["providerID"], format!("vsphere://{uuid}"), "{name}");
        assert_eq!(node["status"]["nodeInfo"]["systemUUID"], local_cluster::real::smbios_uuid(uuid), "{name}");
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["node.kubernetes.io/instance-type"], "vsphere-vm.cpu-1.mem-1gb.os-ubuntu", "{name}");
        assert_eq!(labels["topology.kubernetes.io/zone"], zones[name].as_str(), "{name}");
        assert_eq!(labels["topology.kubernetes.io/region"], "region-1", "{name}");
        seen_zones.insert(zones[name].clone());
        let addresses = CheckedRun::addresses(node);
        let ip = local_cluster::real::node_ip(index as u32).to_string();
        for wanted in [("InternalIP", ip.as_str()), ("ExternalIP", ip.as_str()), ("Hostname", name)] {
            assert!(addresses.contains(&(wanted.0.to_owned(), wanted.1.to_owned())), "{name}: {addresses:?}");
        }
    }
    assert_eq!(seen_zones.len(), 3, "a node per zone");
    run.assert_finished("v1.36.0", version);
}

#[test]
fn the_vsphere_ccm_passes_cloud_e2e_against_vcsim_on_kubernetes_1_37_one_minor_ahead_of_it() {
    run("v1.37.1");
}

#[test]
fn the_vsphere_ccm_passes_cloud_e2e_against_vcsim_on_kubernetes_1_36() {
    run("v1.36.4");
}

/// `harness cluster <args>` with its state in `state`.
fn cluster_command(state: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_STATE_DIR", state)
        .env("CI", "true")
        .arg("cluster")
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_ccm_vcsim_refuses_to_log_in_ends_the_wait_at_once_with_its_own_error() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let up = cluster_command(&state, &["up", "--name", "vs-login", "--cloud", "vcsim", "--nodes", "1"]);
    let guard = scopeguard(&state);
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));

    let dir = state.join("clusters").join("vs-login");
    // vcsim's datastores live in the cluster's dir (removed by `down`), not in the machine's /tmp.
    let datastores: Vec<String> = std::fs::read_dir(dir.join("vcsim-tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(datastores.iter().any(|name| name.starts_with("govcsim-")), "{datastores:?}");
    let cluster_state: local_cluster::ClusterState =
        serde_json::from_slice(&std::fs::read(dir.join("cluster.json")).unwrap()).unwrap();
    let mut cluster = local_cluster::LocalCluster { state: cluster_state, dir };
    // The password the CCM reads is wrong.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(cluster.client().await.unwrap(), vsphere::SECRET_NAMESPACE);
    let patch = serde_json::json!({"stringData": {"127.0.0.1.password": "not-the-password"}});
    secrets
        .patch(vsphere::SECRET_NAME, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();

    let release = toolchain::default_release();
    let ccm = toolchain::vsphere::CCM
        .installed(&release, toolchain::Libraries::Pinned)
        .expect("`harness toolchain install --all` ran");
    let kubeconfig = cluster.state.kubeconfig.display().to_string();
    let args: Vec<String> = [
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--cloud-provider=vsphere".into(),
        format!("--cloud-config={}", cluster.cloud_config().display()),
        "--leader-elect=false".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", cluster.state.ccm_port.unwrap()),
    ]
    .to_vec();
    let started = Instant::now();
    let err = cluster.start_ccm(&ccm, &args).await.unwrap_err().to_string();
    assert!(started.elapsed() < Duration::from_secs(60), "not the 90 s timeout: {:?}", started.elapsed());
    assert!(err.contains("ServerFaultCode: Login failure"), "the CCM's own error: {err}");
    assert!(err.contains("Secret kube-system/vsphere-cloud-secret"), "what to fix: {err}");
    drop(guard);
}

/// Brings the test's cluster down however the test ends.
fn scopeguard(state: &std::path::Path) -> impl Drop + '_ {
    struct Down<'a>(&'a std::path::Path);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            cluster_command(self.0, &["down", "--name", "vs-login"]);
        }
    }
    Down(state)
}
