//! The conformance images built here, on a real node: each runs its own entrypoint and does what
//! upstream's does (agnhost serves, nginx answers on :80, busybox's `wget -T 2 -O-` fetches a page,
//! glibc-dns-testing resolves `kubernetes.default` with dig and glibc, kitten serves its files,
//! etcd answers, busybox's ash says what upstream's does of a read-only root and `/bin/sysctl`
//! runs, nonewprivs reports the effective uid the security context allows, nonroot runs as
//! its user, agnhost's `nc -v -t -z`, curl, dig and getent (the kubelet's /etc/hosts first) work, a ConfigMap's `data-1` reaches `sh -c env`),
//! and a pod whose image volume pulls with `Always` gets it from the cluster's registry.
//!
//! Needs root, the node packages (`scripts/test` installs them), the toolchain and apt (for the
//! Debian packages of nginx, glibc-dns-testing, agnhost's tools and bash); it skips, saying why,
//! only when the kernel lacks a feature real nodes cannot do without.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common;

use common::real::{pod, real_cluster_with, run_to_end, running_ip};
use common::wait_for;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, LogParams, PostParams};
use local_cluster::{UpOptions, images, real};
use serde_json::json;
use toolchain::Release;

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
        assert_eq!(refs.len(), images::BUILT.len(), "{}", release.version);
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

/// `method path` over HTTP/1.1 to `address`: the status, the headers (lower-cased names), the body.
fn http(address: &str, method: &str, path: &str) -> (u16, BTreeMap<String, String>, Vec<u8>) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(stream, "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a header block");
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    let headers =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string())).collect();
    (status, headers, response[split + 4..].to_vec())
}

#[test]
fn the_registry_serves_manifests_and_blobs_by_the_registry_api_and_nothing_else() {
    let release = toolchain::default_release();
    let refs = references(&release);
    let registry = toolchain::install(&release, false).unwrap().binary("registry");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let address = format!("127.0.0.1:{port}");
    let mut child = std::process::Command::new(registry)
        .arg(format!("-index={}", images::registry_index(&release).display()))
        .arg(format!("-listen={address}"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(&address).is_err() {
        assert!(started.elapsed() < Duration::from_secs(10), "the registry did not listen on {address}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let result = std::panic::catch_unwind(|| {
        let (status, headers, _) = http(&address, "GET", "/v2/");
        assert_eq!((status, headers["docker-distribution-api-version"].as_str()), (200, "registry/2.0"));

        let (repository, tag) = images::oci::split_reference(&refs["Kitten"]).unwrap();
        let (status, headers, body) = http(&address, "GET", &format!("/v2/{repository}/manifests/{tag}"));
        assert_eq!((status, headers["content-type"].as_str()), (200, images::oci::MANIFEST_MEDIA_TYPE));
        let digest = headers["docker-content-digest"].clone();
        assert_eq!(images::oci::digest(&body), digest, "the manifest's bytes are its digest");
        let manifest: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let by_digest = http(&address, "GET", &format!("/v2/{repository}/manifests/{digest}"));
        assert_eq!((by_digest.0, by_digest.2), (200, body.clone()));

        for blob in manifest["layers"].as_array().unwrap().iter().chain([&manifest["config"]]) {
            let blob_digest = blob["digest"].as_str().unwrap();
            let path = format!("/v2/{repository}/blobs/{blob_digest}");
            let (status, headers, bytes) = http(&address, "HEAD", &path);
            assert_eq!((status, bytes.len()), (200, 0), "HEAD {path}");
            assert_eq!(headers["content-length"], blob["size"].to_string());
            let (status, _, bytes) = http(&address, "GET", &path);
            assert_eq!((status, images::oci::digest(&bytes)), (200, blob_digest.to_string()), "GET {path}");
        }

        let (status, _, body) = http(&address, "GET", &format!("/v2/{repository}/manifests/0.0-not-built"));
        assert_eq!(status, 404);
        assert!(String::from_utf8_lossy(&body).contains("MANIFEST_UNKNOWN"));
        assert_eq!(http(&address, "GET", "/v2/no/such/manifests/1").0, 404);
        assert_eq!(http(&address, "GET", &format!("/v2/{repository}/blobs/sha256:{}", "0".repeat(64))).0, 404);
        assert_eq!(http(&address, "DELETE", &format!("/v2/{repository}/manifests/{tag}")).0, 405);
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_image_runs_its_entrypoint_as_upstreams_does_and_always_pulls_come_from_the_registry() {
    let release = toolchain::default_release();
    let refs = tokio::task::spawn_blocking(move || references(&release)).await.unwrap();
    let with_conformance_image = |options: &mut UpOptions| options.conformance_image = true;
    let Some(cluster) = real_cluster_with("images-e2e", release, 1, with_conformance_image).await else { return };
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

    // From busybox, with the `wget -T` Debian's busybox crashes on, and the `--post-data` of the
    // PreStop conformance test's hook.
    let script = format!(
        "set -e; wget -T 2 -O- http://{agnhost}:8080/hostname 2>/dev/null; echo; \
         wget -q -O- --post-data='{{\"Source\": \"prestop\"}}' 'http://{agnhost}:8080/echo?msg=posted'; echo; \
         wget -T 2 -qO- http://{nginx}/ | grep -c '<h1>Welcome to nginx'; \
         wget -T 2 -q -O - http://{nginx_new}:80/ | grep -c '<h1>Welcome to nginx'; \
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
        ("Succeeded", "agnhost\nposted\n1\n1\nkitten.jpg\nnautilus.jpg\netcdserver\nrefused"),
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

    // Agnhost carries the tools tests exec in upstream's (Alpine) image: OpenBSD's nc with the
    // Services tests' flags, curl, dig, getent (which reads the kubelet's /etc/hosts, as the DNS
    // hosts tests need); and porter's certificate, which its TLS ports serve with.
    let tools_script = format!(
        "nc -v -t -z -w 2 {ip} 8080 2>&1 | grep -c succeeded; curl -s --max-time 2 http://{ip}:8080/hostname; echo; \
         if nc -z -w 2 {ip} 1 2>/dev/null; then echo open; else echo refused; fi; \
         dig +short +search kubernetes.default A; \
         getent hosts agnhost-tools >/dev/null && echo hosts-file; \
         SERVE_TLS_PORT_8443=tls-served /agnhost porter >/dev/null 2>&1 & \
         for i in 1 2 3 4 5 6 7 8 9 10; do curl -sk --max-time 2 https://127.0.0.1:8443/ && break; sleep 0.5; done",
        ip = ips["agnhost"],
    );
    let tools: Pod = serde_json::from_value(json!({
        "metadata": {"name": "agnhost-tools"},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{
            "name": "tools", "image": image("Agnhost"), "command": ["sh", "-c", tools_script],
        }]},
    }))
    .unwrap();
    let (phase, logs) = run_to_end(&pods, &tools).await;
    assert_eq!(
        (phase.as_str(), logs.trim()),
        ("Succeeded", format!("1\nagnhost\nrefused\n{service_ip}\nhosts-file\ntls-served").as_str())
    );

    // A ConfigMap as environment variables whose names are not shell identifiers (`data-1`), as the
    // ConfigMap/Secret env conformance tests print them with busybox's `sh -c env`.
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let data: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "env-data"},
        "data": {"data-1": "value-1", "data_2": "value-2"},
    }))
    .unwrap();
    config_maps.create(&PostParams::default(), &data).await.unwrap();
    let env: Pod = serde_json::from_value(json!({
        "metadata": {"name": "env"},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{
            "name": "env", "image": image("BusyBox"), "command": ["sh", "-c", "env"],
            "envFrom": [{"configMapRef": {"name": "env-data"}}, {"prefix": "p-", "configMapRef": {"name": "env-data"}}],
        }]},
    }))
    .unwrap();
    let (phase, logs) = run_to_end(&pods, &env).await;
    assert_eq!(phase, "Succeeded", "{logs}");
    for line in ["data-1=value-1", "data_2=value-2", "p-data-1=value-1", "p-data_2=value-2"] {
        assert!(logs.lines().any(|l| l == line), "{line} missing from the container's environment:\n{logs}");
    }

    // Busybox is upstream's: ash's own message on a read-only root filesystem (the Kubelet
    // conformance test compares it), and every applet in /bin (the Sysctls test execs /bin/sysctl).
    // Both lines go to stderr: containerd copies stdout and stderr in separate goroutines, so
    // lines from the two streams reach the log in either order.
    let read_only: Pod = serde_json::from_value(json!({
        "metadata": {"name": "read-only"},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{
            "name": "read-only", "image": image("BusyBox"),
            "command": ["/bin/sh", "-c", "echo test > /file; /bin/sysctl -n kernel.ostype >&2"],
            "securityContext": {"readOnlyRootFilesystem": true},
        }]},
    }))
    .unwrap();
    let (phase, logs) = run_to_end(&pods, &read_only).await;
    assert_eq!(
        (phase.as_str(), logs.as_str()),
        ("Succeeded", "/bin/sh: can't create /file: Read-only file system\nLinux\n")
    );

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
    // containerd resolves each tag through the registry (`HEAD` of the manifest, `GET` when the
    // digest it answers is not in the node's content store: here both still are).
    for path in
        [format!(" /v2/{repository}/manifests/{tag}"), format!(" /v2/{busybox_repository}/manifests/{busybox_tag}")]
    {
        assert!(registry_log.contains(&path), "the registry did not resolve{path}:\n{registry_log}");
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

    conformance_image_runs_a_spec_as_hydrophone_runs_it(&client, &node, &release).await;
    common::assert_torn_down(cluster);
}

/// Upstream's conformance image, as Hydrophone's pod runs it (`--focus`, its user, its results
/// volume, a service account bound to every permission), runs one conformance spec through
/// go-runner, ginkgo and e2e.test with the in-cluster configuration.
async fn conformance_image_runs_a_spec_as_hydrophone_runs_it(client: &kube::Client, node: &str, release: &Release) {
    let namespace = "conformance";
    let objects = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "conformance", "namespace": namespace}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "conformance"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"kind": "ServiceAccount", "name": "conformance", "namespace": namespace}]}),
    ];
    for object in objects {
        let object: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
        let types = object.types.clone().unwrap();
        let gvk = kube::api::GroupVersionKind::try_from(&types).unwrap();
        let resource = kube::api::ApiResource::from_gvk(&gvk);
        let api: Api<kube::api::DynamicObject> = match &object.metadata.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    let reference = images::conformance::reference(release);
    let runner: Pod = serde_json::from_value(json!({
        "metadata": {"name": "e2e-conformance-test"},
        "spec": {"nodeName": node, "restartPolicy": "Never", "serviceAccountName": "conformance", "containers": [{
            "name": "conformance-container", "image": reference, "imagePullPolicy": "IfNotPresent",
            "env": [
                {"name": "E2E_FOCUS", "value": "Pods should get a host IP"},
                {"name": "E2E_PROVIDER", "value": "skeleton"},
                {"name": "E2E_USE_GO_RUNNER", "value": "true"},
            ],
            "volumeMounts": [{"name": "output-volume", "mountPath": "/tmp/results"}],
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                                "runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
        }], "volumes": [{"name": "output-volume", "emptyDir": {}}]},
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let (phase, logs) = run_to_end(&pods, &runner).await;
    assert_eq!(phase, "Succeeded", "{logs}");
    for line in [
        "/usr/local/bin/ginkgo,--focus=Pods should get a host IP,--skip=",
        "/usr/local/bin/e2e.test,--,--disable-log-dump,--repo-root=/kubernetes,--provider=skeleton,--report-dir=/tmp/results,--kubeconfig=\n",
        "SUCCESS! -- 1 Passed | 0 Failed",
    ] {
        assert!(logs.contains(line), "{line:?} missing from the conformance container's output:\n{logs}");
    }
}
