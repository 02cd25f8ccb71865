//! The conformance images built here, on a real node: each runs its own entrypoint and does what
//! upstream's does (agnhost serves, nginx answers on :80, busybox's `wget -T 2 -O-` fetches a page,
//! glibc-dns-testing resolves `kubernetes.default` with dig and glibc, kitten serves its files,
//! etcd answers, nonewprivs reports the effective uid the security context allows, nonroot runs as
//! its user), and a pod whose image volume pulls with `Always` gets it from the cluster's registry.
//!
//! Needs root, the node packages (`scripts/test` installs them), the toolchain and apt (for the
//! Debian packages of nginx and glibc-dns-testing); it skips, saying why, only when the kernel
//! lacks a feature real nodes cannot do without.

use std::collections::BTreeMap;
use std::time::Duration;

mod common;

use common::real::{pod, real_cluster, run_to_end, running_ip};
use common::wait_for;
use harness::cluster::{images, real};
use harness::toolchain;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;

/// The references of the built images of `release`, by `ImageID`.
fn references(release: &toolchain::Release) -> BTreeMap<&'static str, String> {
    let toolchain = toolchain::install(release, false).expect("the toolchain");
    let built = images::install(release, &toolchain).expect("the images");
    built.into_iter().map(|image| (image.id, image.reference)).collect()
}

#[test]
fn every_pinned_release_has_every_image_and_the_registry_serves_each() {
    for release in toolchain::releases() {
        let refs = references(&release);
        assert_eq!(refs.keys().copied().collect::<Vec<_>>().len(), images::BUILT.len(), "{}", release.version);
        let text = std::fs::read(images::registry_index(&release)).unwrap();
        let index: images::oci::RegistryIndex = serde_json::from_slice(&text).unwrap();
        for (id, reference) in &refs {
            let (repository, tag) = images::oci::split_reference(reference).unwrap();
            let digest = &index.repositories[&repository][&tag];
            assert_eq!(index.blobs[digest].media_type, images::oci::MANIFEST_MEDIA_TYPE, "{id}");
        }
        assert_ne!(
            refs["Agnhost"], refs["AgnhostPrev"],
            "{}: agnhost's previous tag is its own image",
            release.version
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_image_runs_its_entrypoint_as_upstreams_does_and_always_pulls_come_from_the_registry() {
    let release = toolchain::default_release();
    let refs = tokio::task::spawn_blocking(move || references(&release)).await.unwrap();
    let Some(cluster) = real_cluster("images-e2e", release, 1).await else { return };
    let client = cluster.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let node = cluster.state.nodes[0].clone();
    let image = |id: &str| refs[id].clone();

    // Servers from their images' own entrypoints (no command, no args but agnhost's subcommand).
    let servers: [(&str, &str, serde_json::Value); 6] = [
        ("agnhost", "Agnhost", json!(["netexec", "--http-port=8080"])),
        ("nginx", "Nginx", json!(null)),
        ("nginx-new", "NginxNew", json!(null)),
        ("kitten", "Kitten", json!(null)),
        ("nautilus", "Nautilus", json!(null)),
        ("agnhost-prev", "AgnhostPrev", json!(null)),
    ];
    for (name, id, args) in &servers {
        let mut server = pod(name, &node, &image(id), args.clone(), "Always");
        if args.is_null() {
            server.spec.as_mut().unwrap().containers[0].args = None;
        }
        pods.create(&PostParams::default(), &server).await.unwrap();
    }
    let etcd: Pod = serde_json::from_value(json!({
        "metadata": {"name": "etcd"},
        "spec": {"nodeName": node, "containers": [{
            "name": "etcd", "image": image("Etcd"),
            // As the aggregator conformance test runs it, but listening on the pod's address.
            "command": ["/usr/local/bin/etcd", "--listen-client-urls", "http://0.0.0.0:2379",
                        "--advertise-client-urls", "http://127.0.0.1:2379", "--data-dir", "/tmp/etcd"],
        }]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &etcd).await.unwrap();
    let mut ips = BTreeMap::new();
    for name in ["agnhost", "nginx", "nginx-new", "kitten", "nautilus", "agnhost-prev", "etcd"] {
        ips.insert(name, running_ip(&pods, name).await);
    }

    // From busybox, with the `wget -T` Debian's busybox crashes on.
    let script = format!(
        "set -e; wget -T 2 -O- http://{agnhost}:8080/hostname 2>/dev/null; echo; \
         wget -T 2 -qO- http://{nginx}/ | grep -c 'Welcome to nginx'; \
         wget -T 2 -q -O - http://{nginx_new}:80/ | grep -c 'Welcome to nginx'; \
         wget -T 2 -qO- http://{kitten}/data.json | grep -o kitten.jpg; \
         wget -T 2 -qO- http://{nautilus}/data.json | grep -o nautilus.jpg; \
         wget -T 2 -qO- http://{etcd}:2379/version | grep -o etcdserver; \
         if wget -T 1 -qO- http://{agnhost}:1/ 2>/dev/null; then echo refused-port-answered; else echo refused; fi",
        agnhost = ips["agnhost"],
        nginx = ips["nginx"],
        nginx_new = ips["nginx-new"],
        kitten = ips["kitten"],
        nautilus = ips["nautilus"],
        etcd = ips["etcd"],
    );
    let client_pod = pod("busybox", &node, &image("BusyBox"), json!(["sh", "-c", script]), "Never");
    let (phase, logs) = run_to_end(&pods, &client_pod).await;
    assert_eq!(
        (phase.as_str(), logs.trim()),
        ("Succeeded", "agnhost\n1\n1\nkitten.jpg\nnautilus.jpg\netcdserver\nrefused"),
        "the busybox client's output"
    );
    let nginx_logs = pods.logs("nginx", &LogParams::default()).await.unwrap();
    assert!(nginx_logs.contains("GET / HTTP/1.1"), "nginx logs its requests to its output: {nginx_logs}");

    // Agnhost's previous tag is another image (a layer differs), as the Pods lifecycle test expects.
    let image_id = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let pod = pods.get(name).await.unwrap();
            pod.status.unwrap().container_statuses.unwrap()[0].image_id.clone()
        }
    };
    assert_ne!(image_id("agnhost").await, image_id("agnhost-prev").await);

    // glibc-dns-testing resolves the API server's Service with dig and with glibc (getent).
    let dns = pod(
        "dns",
        &node,
        &image("GlibcDnsTesting"),
        json!([
            "sh",
            "-c",
            "dig +short +search kubernetes.default A && getent hosts kubernetes.default | cut -d' ' -f1 && test -x /coredns"
        ]),
        "Never",
    );
    let (phase, logs) = run_to_end(&pods, &dns).await;
    let service_ip = real::SERVICE_IP.to_string();
    assert_eq!((phase.as_str(), logs.trim()), ("Succeeded", format!("{service_ip}\n{service_ip}").as_str()));

    // nonewprivs: setuid root unless the security context forbids escalation (the conformance
    // test's check); nonroot runs as its image's user.
    for (allow, expected) in [(false, "Effective uid: 1000"), (true, "Effective uid: 0")] {
        let name = format!("nnp-{allow}");
        let nnp: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{
                "name": "nnp", "image": image("Nonewprivs"),
                "securityContext": {"runAsUser": 1000, "allowPrivilegeEscalation": allow},
            }]},
        }))
        .unwrap();
        let (phase, logs) = run_to_end(&pods, &nnp).await;
        assert_eq!((phase.as_str(), logs.trim()), ("Succeeded", expected), "allowPrivilegeEscalation {allow}");
    }
    let nonroot = pod("nonroot", &node, &image("NonRoot"), json!(["id", "-u"]), "Never");
    assert_eq!(run_to_end(&pods, &nonroot).await, ("Succeeded".to_string(), "1234\n".to_string()));

    // sample-apiserver: its entrypoint is the aggregated API server's command.
    let apiserver = pod("sample-apiserver", &node, &image("APIServer"), json!(["--help"]), "Never");
    let (phase, logs) = run_to_end(&pods, &apiserver).await;
    assert_eq!(phase, "Succeeded", "{logs}");
    assert!(logs.contains("--etcd-servers"), "{logs}");

    // An image volume that pulls with `Always` (the ImageVolume conformance test), of an image
    // removed from the node first: containerd fetches it from the registry in the hub.
    let kitten = image("Kitten");
    let socket = real::socket_dir(&cluster.dir).join("containerd-0.sock");
    let ctr = toolchain::install(&release, false).unwrap().binary("ctr");
    let removed = std::process::Command::new(&ctr)
        .arg(format!("--address={}", socket.display()))
        .args(["--namespace=k8s.io", "images", "rm", "--sync", &kitten])
        .output()
        .unwrap();
    // The kitten server pod still runs from it, so its content stays; the manifest is fetched anew.
    assert!(removed.status.success(), "ctr images rm: {}", String::from_utf8_lossy(&removed.stderr));
    let volume: Pod = serde_json::from_value(json!({
        "metadata": {"name": "image-volume"},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{
                "name": "reader", "image": image("BusyBox"), "imagePullPolicy": "Always",
                "command": ["sh", "-c", "cat /volume/data.json /volume/etc/os-release"],
                "volumeMounts": [{"name": "volume", "mountPath": "/volume"}],
            }],
            "volumes": [{"name": "volume", "image": {"reference": kitten, "pullPolicy": "Always"}}],
        },
    }))
    .unwrap();
    let (phase, logs) = run_to_end(&pods, &volume).await;
    assert_eq!(phase, "Succeeded", "{logs}");
    assert!(logs.contains("kitten.jpg") && logs.contains("Alpine Linux"), "{logs}");
    let registry_log = std::fs::read_to_string(cluster.dir.join("logs/registry.log")).unwrap();
    let (repository, tag) = images::oci::split_reference(&kitten).unwrap();
    let (busybox_repository, busybox_tag) = images::oci::split_reference(&image("BusyBox")).unwrap();
    for path in [
        format!("GET /v2/{repository}/manifests/{tag}"),
        format!("GET /v2/{busybox_repository}/manifests/{busybox_tag}"),
    ] {
        assert!(registry_log.contains(&path), "the registry did not serve {path}:\n{registry_log}");
    }
    // A pull the registry cannot serve fails rather than reaching out of the cluster.
    let absent: Pod = serde_json::from_value(json!({
        "metadata": {"name": "absent"},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{
            "name": "absent", "image": "registry.k8s.io/e2e-test-images/not-built-here:1.0",
        }]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &absent).await.unwrap();
    let reason = wait_for("the absent image's pull to fail", Duration::from_secs(60), || {
        let pods = pods.clone();
        async move {
            let status = pods.get("absent").await.ok()?.status?;
            let waiting = status.container_statuses?.first()?.state.as_ref()?.waiting.clone()?;
            waiting.reason.filter(|r| r == "ErrImagePull" || r == "ImagePullBackOff")
        }
    })
    .await;
    assert!(reason.contains("Image"), "{reason}");
    let registry_log = std::fs::read_to_string(cluster.dir.join("logs/registry.log")).unwrap();
    assert!(registry_log.contains("/v2/e2e-test-images/not-built-here/manifests/1.0"), "{registry_log}");

    common::assert_torn_down(cluster);
}
