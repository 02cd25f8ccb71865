//! The local cloud served in-process on 127.0.0.1, driven through the `local` provider (ccm's
//! cloud traits over its API), as the reference CCM's controllers drive it.

use std::path::Path;
use std::time::Duration;

use ccm::cloud::{CloudError, CloudProvider, InstancesV2, LoadBalancer, Route, Routes};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use local_cloud::api::{
    Address, AddressType, CreateInstance, ErrorBody, FaultMode, FaultSpec, InstanceState,
    LoadBalancer as LoadBalancerBody,
};
use local_cloud::{
    ADDRESS_FILE, ClientConfig, IpPool, LocalCloud, LocalCloudServer, STATE_FILE, ServeError, ServerConfig, StoreError,
    url_from_state_dir,
};
use reference_ccm::local_provider::{LocalProvider, SOURCE_RANGES_ANNOTATION};
use tempfile::TempDir;

const CLUSTER: &str = "kubernetes";
const RETRIES: usize = 3;

async fn start(state_dir: &Path, pool: &str) -> LocalCloudServer {
    let config = ServerConfig {
        state_dir: state_dir.to_owned(),
        listen: "127.0.0.1:0".parse().unwrap(),
        ip_pool: pool.parse::<IpPool>().unwrap(),
    };
    LocalCloudServer::start(config).await.unwrap()
}

fn client(url: &str, timeout: Duration) -> LocalProvider {
    let config = ClientConfig {
        timeout,
        retries: RETRIES,
        min_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
        ..ClientConfig::new(url)
    };
    LocalProvider::new(LocalCloud::new(config).unwrap())
}

struct Cloud {
    server: LocalCloudServer,
    cloud: LocalProvider,
    dir: TempDir,
}

async fn cloud_with_pool(pool: &str) -> Cloud {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), pool).await;
    let cloud = client(&server.url(), Duration::from_secs(5));
    Cloud { server, cloud, dir }
}

async fn cloud() -> Cloud {
    cloud_with_pool("127.200.0.0/16").await
}

fn node(name: &str) -> Node {
    Node { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, ..Node::default() }
}

fn node_with_provider_id(name: &str, provider_id: &str) -> Node {
    Node { spec: Some(NodeSpec { provider_id: Some(provider_id.into()), ..NodeSpec::default() }), ..node(name) }
}

fn service(uid: &str, port: i32) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(format!("svc-{uid}")),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort { port, node_port: Some(30000 + port), ..ServicePort::default() }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

async fn create_instance(cloud: &LocalProvider, name: &str) -> String {
    cloud.cloud().create_instance(&CreateInstance { name: name.into(), ..CreateInstance::default() }).await.unwrap().id
}

async fn inject(cloud: &LocalProvider, operation: &str, count: Option<u64>, mode: FaultMode, delay_ms: u64) {
    let spec = FaultSpec { operation: operation.into(), count, mode, status: 503, delay_ms };
    cloud.cloud().inject_fault(&spec).await.unwrap();
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The value of one sample in the cloud's `/metrics`, 0 when absent.
async fn metric(url: &str, sample: &str) -> u64 {
    let text = http().get(format!("{url}/metrics")).send().await.unwrap().text().await.unwrap();
    let line = text.lines().find(|line| line.starts_with(sample) && line[sample.len()..].starts_with(' '));
    line.map_or(0, |line| line[sample.len()..].trim().parse().unwrap())
}

fn requests(operation: &str, status: u16) -> String {
    format!(r#"local_cloud_requests_total{{operation="{operation}",status="{status}"}}"#)
}

fn ingress_ip(status: &k8s_openapi::api::core::v1::LoadBalancerStatus) -> String {
    let ingress = status.ingress.as_ref().unwrap();
    assert_eq!(ingress.len(), 1, "{status:?}");
    ingress[0].ip.clone().unwrap()
}

fn api_message(error: CloudError) -> String {
    match error {
        CloudError::Api(message) => message,
        other => panic!("expected CloudError::Api, got {other:?}"),
    }
}

#[tokio::test]
async fn instance_metadata_comes_from_the_instance_found_by_name_or_provider_id() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    let request = CreateInstance {
        name: "node-1".into(),
        instance_type: Some("local.large".into()),
        zone: Some("local-b".into()),
        region: Some("local-2".into()),
        addresses: vec![
            Address { kind: AddressType::InternalIP, address: "127.0.10.1".into() },
            Address { kind: AddressType::Hostname, address: "node-1".into() },
        ],
    };
    let id = cloud.cloud().create_instance(&request).await.unwrap().id;
    create_instance(&cloud, "node-2").await;

    let metadata = cloud.instance_metadata(&node("node-1")).await.unwrap();

    assert_eq!(metadata.provider_id, format!("local://{id}"));
    assert_eq!(
        (metadata.instance_type.as_str(), metadata.zone.as_str(), metadata.region.as_str()),
        ("local.large", "local-b", "local-2")
    );
    assert_eq!(
        metadata.node_addresses,
        vec![
            NodeAddress { type_: "InternalIP".into(), address: "127.0.10.1".into() },
            NodeAddress { type_: "Hostname".into(), address: "node-1".into() },
        ]
    );
    // The provider ID wins over the name: this node is named node-2 but points at node-1's instance.
    let by_id = cloud.instance_metadata(&node_with_provider_id("node-2", &format!("local://{id}"))).await.unwrap();
    assert_eq!(by_id.zone, "local-b");
    assert_eq!(cloud.provider_name(), "local");
    assert!(cloud.instances_v2().is_some() && cloud.load_balancer().is_some() && cloud.routes().is_some());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn unknown_instances_do_not_exist_and_have_no_metadata() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;

    assert!(!cloud.instance_exists(&node("ghost")).await.unwrap());
    assert!(!cloud.instance_exists(&node_with_provider_id("ghost", "local://i-00000000")).await.unwrap());
    assert_eq!(cloud.instance_metadata(&node("ghost")).await, Err(CloudError::InstanceNotFound));
    assert_eq!(cloud.instance_shutdown(&node("ghost")).await, Err(CloudError::InstanceNotFound));
    let foreign = cloud.instance_exists(&node_with_provider_id("n", "aws:///us-east-1a/i-1")).await.unwrap_err();
    assert!(api_message(foreign).contains("instance_exists"));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn terminated_instances_no_longer_exist() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    let id = create_instance(&cloud, "node-1").await;
    assert!(cloud.instance_exists(&node("node-1")).await.unwrap());

    let terminated = cloud.cloud().terminate_instance("node-1").await.unwrap();

    assert_eq!(terminated.state, InstanceState::Terminated);
    assert!(!cloud.instance_exists(&node("node-1")).await.unwrap());
    assert!(!cloud.instance_exists(&node_with_provider_id("node-1", &format!("local://{id}"))).await.unwrap());
    assert_eq!(cloud.instance_metadata(&node("node-1")).await, Err(CloudError::InstanceNotFound));
    assert!(!cloud.instance_shutdown(&node("node-1")).await.unwrap());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn shut_down_instances_exist_and_report_shutdown_until_started() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    create_instance(&cloud, "node-1").await;
    assert!(!cloud.instance_shutdown(&node("node-1")).await.unwrap());

    cloud.cloud().shutdown_instance("node-1").await.unwrap();

    assert!(cloud.instance_shutdown(&node("node-1")).await.unwrap());
    assert!(cloud.instance_exists(&node("node-1")).await.unwrap());
    cloud.cloud().start_instance("node-1").await.unwrap();
    assert!(!cloud.instance_shutdown(&node("node-1")).await.unwrap());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_second_live_instance_with_the_same_name_is_refused() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    create_instance(&cloud, "node-1").await;

    let duplicate =
        cloud.cloud().create_instance(&CreateInstance { name: "node-1".into(), ..Default::default() }).await;

    let message = duplicate.unwrap_err().message;
    assert!(message.contains("create_instance") && message.contains("409"), "{message}");
    assert_eq!(cloud.cloud().list_instances().await.unwrap().len(), 1);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn load_balancers_get_distinct_ips_new_backends_and_free_their_ip_on_delete() {
    let Cloud { server, cloud, dir: _dir } = cloud_with_pool("127.200.0.0/29").await;
    let (first, second) = (service("aaaa-1111", 80), service("bbbb-2222", 443));

    let first_ip = ingress_ip(&cloud.ensure_load_balancer(CLUSTER, &first, &[node("n1")]).await.unwrap());
    let second_ip = ingress_ip(&cloud.ensure_load_balancer(CLUSTER, &second, &[node("n1")]).await.unwrap());

    assert_ne!(first_ip, second_ip);
    let pool: IpPool = "127.200.0.0/29".parse().unwrap();
    assert!([&first_ip, &second_ip].iter().all(|ip| pool.contains(ip.parse().unwrap())));
    let (status, exists) = cloud.get_load_balancer(CLUSTER, &first).await.unwrap();
    assert!(exists);
    assert_eq!(ingress_ip(&status.unwrap()), first_ip);
    // Ensuring again keeps the IP.
    let again = cloud.ensure_load_balancer(CLUSTER, &first, &[node("n1")]).await.unwrap();
    assert_eq!(ingress_ip(&again), first_ip);

    cloud.update_load_balancer(CLUSTER, &first, &[node("n2"), node("n3")]).await.unwrap();
    let name = cloud.get_load_balancer_name(CLUSTER, &first);
    let listed = cloud.cloud().list_load_balancers().await.unwrap();
    let stored = listed.iter().find(|balancer| balancer.name == name).unwrap();
    assert_eq!(stored.backends, vec!["n2", "n3"]);
    assert_eq!((stored.ports[0].port, stored.ports[0].node_port), (80, 30080));
    assert_eq!(stored.service, "default/svc-aaaa-1111");

    cloud.ensure_load_balancer_deleted(CLUSTER, &first).await.unwrap();
    assert_eq!(cloud.get_load_balancer(CLUSTER, &first).await.unwrap(), (None, false));
    cloud.ensure_load_balancer_deleted(CLUSTER, &first).await.unwrap();
    // The lowest free address is handed out first, so the freed one comes back.
    let third = cloud.ensure_load_balancer(CLUSTER, &service("cccc-3333", 80), &[]).await.unwrap();
    assert_eq!(ingress_ip(&third), first_ip);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn source_ranges_round_trip_survive_a_backend_update_and_must_be_cidrs() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    let url = format!("{}/v1/loadbalancers/{CLUSTER}/lb-1", server.url());
    let body = serde_json::json!({
        "service": "default/web",
        "ports": [{"protocol": "TCP", "port": 80, "node_port": 30080}],
        "backends": ["n1"],
        "source_ranges": ["10.0.0.0/8", "fd00::/64"],
    });

    let put = http().put(&url).json(&body).send().await.unwrap();

    assert_eq!(put.status(), 200);
    let created: LoadBalancerBody = put.json().await.unwrap();
    assert_eq!(created.source_ranges, ["10.0.0.0/8", "fd00::/64"]);
    let got: LoadBalancerBody = http().get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(got, created);
    // PATCH replaces the backends only.
    let patched = http().patch(&url).json(&serde_json::json!({"backends": ["n2"]})).send().await.unwrap();
    let patched: LoadBalancerBody = patched.json().await.unwrap();
    assert_eq!(
        (patched.backends.as_slice(), patched.source_ranges.as_slice()),
        (&["n2".to_string()][..], &created.source_ranges[..])
    );
    let listed = cloud.cloud().list_load_balancers().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].source_ranges, created.source_ranges);

    let invalid = serde_json::json!({"backends": ["n1"], "source_ranges": ["10.0.0.0/8", "10.0.0.0/40"]});
    let refused = http().put(&url).json(&invalid).send().await.unwrap();

    assert_eq!(refused.status(), 400);
    let error: ErrorBody = refused.json().await.unwrap();
    assert!(error.error.contains("source_ranges") && error.error.contains("10.0.0.0/40"), "{}", error.error);
    let kept: LoadBalancerBody = http().get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(kept, patched);
    // A PUT without ranges replaces them with none.
    let bare = http().put(&url).json(&serde_json::json!({"backends": ["n1"]})).send().await.unwrap();
    assert!(bare.json::<LoadBalancerBody>().await.unwrap().source_ranges.is_empty());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_provider_sends_the_services_source_ranges_and_refuses_bad_ones() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    let mut annotated = service("aaaa", 80);
    annotated.metadata.annotations =
        Some([(SOURCE_RANGES_ANNOTATION.to_string(), "10.1.2.3/16, 192.168.0.0/24".to_string())].into());

    cloud.ensure_load_balancer(CLUSTER, &annotated, &[node("n1")]).await.unwrap();

    let listed = cloud.cloud().list_load_balancers().await.unwrap();
    assert_eq!(listed[0].source_ranges, ["10.1.0.0/16", "192.168.0.0/24"]);
    let plain = service("bbbb", 80);
    cloud.ensure_load_balancer(CLUSTER, &plain, &[]).await.unwrap();
    let name = cloud.get_load_balancer_name(CLUSTER, &plain);
    let listed = cloud.cloud().list_load_balancers().await.unwrap();
    assert_eq!(listed.iter().find(|b| b.name == name).unwrap().source_ranges, ["0.0.0.0/0"]);

    annotated.metadata.annotations =
        Some([(SOURCE_RANGES_ANNOTATION.to_string(), "10.0.0.0/8,bogus".to_string())].into());
    let message = api_message(cloud.ensure_load_balancer(CLUSTER, &annotated, &[]).await.unwrap_err());

    assert!(message.contains("default/svc-aaaa") && message.contains(SOURCE_RANGES_ANNOTATION), "{message}");
    assert!(message.contains("bogus"), "{message}");
    // Nothing reached the cloud: the load balancer keeps its ranges.
    let listed = cloud.cloud().list_load_balancers().await.unwrap();
    let kept = listed.iter().find(|b| b.service == "default/svc-aaaa").unwrap();
    assert_eq!(kept.source_ranges, ["10.1.0.0/16", "192.168.0.0/24"]);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_exhausted_pool_fails_the_ensure_call() {
    let Cloud { server, cloud, dir: _dir } = cloud_with_pool("127.200.0.5/32").await;
    cloud.ensure_load_balancer(CLUSTER, &service("aaaa", 80), &[]).await.unwrap();

    let error = cloud.ensure_load_balancer(CLUSTER, &service("bbbb", 80), &[]).await.unwrap_err();

    let message = api_message(error);
    assert!(message.contains("ensure_load_balancer") && message.contains("exhausted"), "{message}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn updating_a_missing_load_balancer_is_an_error() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;

    let error = cloud.update_load_balancer(CLUSTER, &service("nope", 80), &[node("n1")]).await.unwrap_err();

    let message = api_message(error);
    assert!(message.contains("update_load_balancer") && message.contains("kubernetes/anope not found"), "{message}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn routes_are_created_listed_and_deleted() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    create_instance(&cloud, "node-1").await;
    let route = |target: &str, cidr: &str| Route {
        target_node: target.into(),
        destination_cidr: cidr.into(),
        ..Route::default()
    };
    cloud.create_route(CLUSTER, "uid-1", &route("node-1", "10.244.1.0/24")).await.unwrap();
    cloud.create_route(CLUSTER, "uid-2", &route("node-2", "10.244.2.0/24")).await.unwrap();
    cloud.create_route("other-cluster", "uid-3", &route("node-1", "10.244.3.0/24")).await.unwrap();

    let mut listed = cloud.list_routes(CLUSTER).await.unwrap();
    listed.sort_by(|a, b| a.destination_cidr.cmp(&b.destination_cidr));

    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!((listed[0].name.as_str(), listed[0].blackhole), ("uid-1-10-244-1-0-24", false));
    // node-2 has no instance, so its route goes nowhere.
    assert!(listed[1].blackhole);
    cloud.delete_route(CLUSTER, &listed[0]).await.unwrap();
    // A route without its cloud name is found by its CIDR.
    cloud.delete_route(CLUSTER, &route("node-2", "10.244.2.0/24")).await.unwrap();
    assert!(cloud.list_routes(CLUSTER).await.unwrap().is_empty());
    assert_eq!(cloud.list_routes("other-cluster").await.unwrap().len(), 1);
    cloud.delete_route(CLUSTER, &listed[0]).await.unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn state_survives_a_restart_from_the_same_state_dir() {
    let Cloud { server, cloud, dir } = cloud().await;
    let id = create_instance(&cloud, "node-1").await;
    cloud.cloud().shutdown_instance("node-1").await.unwrap();
    let kept_ip = ingress_ip(&cloud.ensure_load_balancer(CLUSTER, &service("aaaa", 80), &[]).await.unwrap());
    let route = Route { target_node: "node-1".into(), destination_cidr: "10.244.1.0/24".into(), ..Route::default() };
    cloud.create_route(CLUSTER, "uid-1", &route).await.unwrap();
    server.shutdown().await.unwrap();
    assert!(!dir.path().join(ADDRESS_FILE).exists());

    let server = start(dir.path(), "127.200.0.0/16").await;
    let cloud = client(&server.url(), Duration::from_secs(5));

    let metadata = cloud.instance_metadata(&node("node-1")).await.unwrap();
    assert_eq!(metadata.provider_id, format!("local://{id}"));
    assert!(cloud.instance_shutdown(&node("node-1")).await.unwrap());
    let (status, exists) = cloud.get_load_balancer(CLUSTER, &service("aaaa", 80)).await.unwrap();
    assert!(exists);
    assert_eq!(ingress_ip(&status.unwrap()), kept_ip);
    let fresh_ip = ingress_ip(&cloud.ensure_load_balancer(CLUSTER, &service("bbbb", 80), &[]).await.unwrap());
    assert_ne!(fresh_ip, kept_ip);
    assert_eq!(cloud.list_routes(CLUSTER).await.unwrap().len(), 1);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_address_file_tells_other_processes_where_the_cloud_is() {
    let Cloud { server, cloud, dir } = cloud().await;

    let url = url_from_state_dir(dir.path()).unwrap();

    assert_eq!(url, server.url());
    assert!(url.starts_with("http://127.0.0.1:") && !url.ends_with(":0"), "{url}");
    let health = http().get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let metrics = http().get(format!("{url}/metrics")).send().await.unwrap();
    assert!(metrics.headers()["content-type"].to_str().unwrap().starts_with("application/openmetrics-text"));
    assert_eq!(cloud.cloud().list_instances().await.unwrap(), vec![]);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_corrupt_state_file_stops_the_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let state_file = dir.path().join(STATE_FILE);
    std::fs::write(&state_file, "{\"instances\": [not json").unwrap();
    let config = ServerConfig {
        state_dir: dir.path().to_owned(),
        listen: "127.0.0.1:0".parse().unwrap(),
        ip_pool: IpPool::default(),
    };

    let error = LocalCloudServer::start(config).await.unwrap_err();

    assert!(matches!(&error, ServeError::Store(StoreError::Corrupt { path, .. }) if *path == state_file), "{error}");
    assert!(error.to_string().contains(&state_file.display().to_string()), "{error}");
}

#[tokio::test]
async fn listening_outside_loopback_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        state_dir: dir.path().to_owned(),
        listen: "0.0.0.0:0".parse().unwrap(),
        ip_pool: IpPool::default(),
    };

    assert!(matches!(LocalCloudServer::start(config).await, Err(ServeError::NotLoopback(_))));
}

#[tokio::test]
async fn fewer_faults_than_retries_fail_exactly_those_calls_and_the_call_succeeds() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    create_instance(&cloud, "node-1").await;
    inject(&cloud, "instance_metadata", Some(2), FaultMode::Fail, 0).await;

    let metadata = cloud.instance_metadata(&node("node-1")).await.unwrap();

    assert_eq!(metadata.zone, "local-a");
    let url = server.url();
    assert_eq!(metric(&url, &requests("instance_metadata", 503)).await, 2);
    assert_eq!(metric(&url, &requests("instance_metadata", 200)).await, 1);
    assert!(cloud.cloud().list_faults().await.unwrap().is_empty());
    // Other operations were never faulted.
    assert!(cloud.instance_exists(&node("node-1")).await.unwrap());
    assert_eq!(metric(&url, &requests("instance_exists", 503)).await, 0);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn persistent_faults_exhaust_the_retries_and_name_the_operation() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    create_instance(&cloud, "node-1").await;
    inject(&cloud, "*", None, FaultMode::Fail, 0).await;

    let error = cloud.instance_exists(&node("node-1")).await.unwrap_err();

    let message = api_message(error);
    let url = server.url();
    assert!(message.contains("instance_exists"), "{message}");
    assert!(message.contains(&format!("{url}/v1/instances/node-1")), "{message}");
    assert!(message.contains("503") && message.contains("after 4 attempts"), "{message}");
    assert_eq!(metric(&url, &requests("instance_exists", 503)).await, RETRIES as u64 + 1);
    let route = Route { target_node: "node-1".into(), destination_cidr: "10.244.1.0/24".into(), ..Route::default() };
    assert!(api_message(cloud.create_route(CLUSTER, "u", &route).await.unwrap_err()).contains("create_route"));

    assert_eq!(cloud.cloud().clear_faults().await.unwrap(), 1);
    assert!(cloud.instance_exists(&node("node-1")).await.unwrap());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_delay_longer_than_the_timeout_is_a_timeout_error() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    create_instance(&cloud, "node-1").await;
    let impatient = client(&server.url(), Duration::from_millis(200));
    inject(&cloud, "instance_metadata", Some(1), FaultMode::Delay, 1_000).await;

    let error = impatient.instance_metadata(&node("node-1")).await.unwrap_err();

    let message = api_message(error);
    assert!(message.contains("instance_metadata") && message.contains("timed out after 200ms"), "{message}");
    // Timeouts are not retried, and the one delay was used up by that single attempt.
    assert!(!message.contains("attempts"), "{message}");
    assert!(impatient.instance_metadata(&node("node-1")).await.is_ok());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_short_delay_only_slows_the_call() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    inject(&cloud, "list_routes", Some(1), FaultMode::Delay, 300).await;

    let started = std::time::Instant::now();
    let routes = cloud.list_routes(CLUSTER).await.unwrap();

    assert!(routes.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    let faults = r#"local_cloud_injected_faults_total{operation="list_routes",mode="delay"}"#;
    assert_eq!(metric(&server.url(), faults).await, 1);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_cloud_is_retried_then_reported() {
    let Cloud { server, dir: _dir, .. } = cloud().await;
    let url = server.url();
    server.shutdown().await.unwrap();
    let cloud = client(&url, Duration::from_secs(1));

    let error = cloud.instance_exists(&node("node-1")).await.unwrap_err();

    let message = api_message(error);
    assert!(message.contains("cannot reach the cloud") && message.contains("after 4 attempts"), "{message}");
}

#[tokio::test]
async fn nonsense_faults_are_refused_by_the_server() {
    let Cloud { server, cloud, dir: _dir } = cloud().await;
    let spec =
        FaultSpec { operation: "reboot".into(), count: Some(1), mode: FaultMode::Fail, status: 503, delay_ms: 0 };

    let message = cloud.cloud().inject_fault(&spec).await.unwrap_err().message;

    assert!(message.contains("400") && message.contains("unknown operation"), "{message}");
    assert!(cloud.cloud().list_faults().await.unwrap().is_empty());
    server.shutdown().await.unwrap();
}
