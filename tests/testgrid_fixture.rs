//! The TestGrid fixtures work: a hand-made Prow build in the GCS emulator reads back, through
//! TestGrid's own updater, as the grid TestGrid would show; and object_store's GCS client (what
//! the harness publishes with) can write to and read from the emulator.

use crate::common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::fake_gcs::FakeGcs;
use common::testgrid::read_grid;

const JUNIT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="Kubernetes e2e suite" tests="2" failures="1" time="3.5">
    <testcase name="[sig-cloud-provider] nodes get addresses" classname="Kubernetes e2e suite" time="1.5"></testcase>
    <testcase name="[sig-cloud-provider] load balancers work" classname="Kubernetes e2e suite" time="2">
      <failure message="timed out waiting for the load balancer" type="Failure">lb.go:42: boom</failure>
    </testcase>
  </testsuite>
</testsuites>
"#;

#[test]
fn testgrid_reads_a_hand_made_prow_build() {
    let gcs = FakeGcs::start();
    gcs.create_bucket("results");
    let job = "logs/ci-fixture";
    gcs.upload("results", &format!("{job}/1001/started.json"), r#"{"timestamp":1700000000}"#);
    gcs.upload("results", &format!("{job}/1001/build-log.txt"), "ran the tests\n");
    gcs.upload("results", &format!("{job}/1001/artifacts/junit_01.xml"), JUNIT);
    gcs.upload(
        "results",
        &format!("{job}/1001/finished.json"),
        r#"{"timestamp":1700000100,"passed":false,"result":"FAILURE","metadata":{"kubernetes-version":"v1.37.1","provider-version":"abc"}}"#,
    );
    // A build still running: started.json and no finished.json.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs();
    gcs.upload("results", &format!("{job}/1002/started.json"), format!(r#"{{"timestamp":{now}}}"#));
    gcs.upload("results", &format!("{job}/latest-build.txt"), "1002");
    assert_eq!(gcs.list("results", &format!("{job}/1001/")).len(), 4);

    let grid = read_grid(gcs.emulator_host(), "results/logs/ci-fixture", &["kubernetes-version", "provider-version"]);

    assert_eq!(grid.name, "ci-fixture");
    let builds: Vec<&str> = grid.columns.iter().map(|c| c.build.as_str()).collect();
    assert_eq!(builds, ["1002", "1001"], "newest first");
    let done = grid.column("1001");
    assert_eq!(done.extra, ["v1.37.1", "abc"]);
    assert_eq!(done.started_ms, 1_700_000_000_000.0);
    assert_eq!(grid.column("1002").extra, ["", ""], "a running build has no header values yet");

    let passed = "Kubernetes e2e suite.[sig-cloud-provider] nodes get addresses";
    let failed = "Kubernetes e2e suite.[sig-cloud-provider] load balancers work";
    assert_eq!(grid.result(passed, "1001"), "PASS");
    assert_eq!(grid.result(failed, "1001"), "FAIL");
    assert!(grid.message(failed, "1001").contains("timed out waiting for the load balancer"), "{grid:#?}");
    assert_eq!(grid.result(passed, "1002"), "NO_RESULT");
    assert_eq!(grid.result("ci-fixture.Overall", "1001"), "FAIL");
    assert_eq!(grid.result("ci-fixture.Overall", "1002"), "RUNNING");
    assert_eq!(grid.message("ci-fixture.Overall", "1002"), "Build still running...");
    // No podinfo.json: Prow's pod row says so, as a skip once the build is an hour old.
    assert_eq!(grid.result("ci-fixture.Pod", "1001"), "PASS_WITH_SKIPS");
    assert_eq!(grid.rows.len(), 4, "{grid:#?}");
}

#[tokio::test]
async fn object_store_writes_and_reads_through_the_emulator() {
    use object_store::gcp::GoogleCloudStorageBuilder;
    use object_store::path::Path;
    use object_store::{ClientOptions, ObjectStore, PutPayload, WriteMultipart};

    let gcs = FakeGcs::start();
    gcs.create_bucket("results");
    // As the harness configures object_store for STORAGE_EMULATOR_HOST: no credentials, and the
    // emulator's URL as the service account's base URL.
    let key = serde_json::json!({
        "gcs_base_url": gcs.url(),
        "disable_oauth": true,
        "client_email": "",
        "private_key": "",
        "private_key_id": "",
    });
    let store = GoogleCloudStorageBuilder::new()
        .with_bucket_name("results")
        .with_service_account_key(key.to_string())
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .build()
        .expect("object_store GCS client");

    let small = Path::from("logs/job/7/started.json");
    store.put(&small, PutPayload::from(r#"{"timestamp":1700000000}"#)).await.expect("put");
    // Three parts through the XML multipart upload.
    let big = Path::from("logs/job/7/artifacts/big.log");
    let content: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let mut writer =
        WriteMultipart::new_with_chunk_size(store.put_multipart(&big).await.expect("start multipart"), 1024);
    writer.write(&content);
    writer.finish().await.expect("finish multipart");

    let got = store.get(&small).await.expect("get").bytes().await.expect("body");
    assert_eq!(&got[..], br#"{"timestamp":1700000000}"#);
    assert_eq!(store.head(&big).await.expect("head").size, 3000);
    assert_eq!(store.get(&big).await.expect("get").bytes().await.expect("body").to_vec(), content);
    let listing = store.list_with_delimiter(Some(&Path::from("logs/job/7"))).await.expect("list");
    let objects: Vec<String> = listing.objects.iter().map(|o| o.location.to_string()).collect();
    let dirs: Vec<String> = listing.common_prefixes.iter().map(|p| p.to_string()).collect();
    assert_eq!(objects, ["logs/job/7/started.json"]);
    assert_eq!(dirs, ["logs/job/7/artifacts"]);

    // And what object_store wrote is what any other client reads.
    assert_eq!(gcs.download("results", "logs/job/7/artifacts/big.log").as_deref(), Some(&content[..]));
    assert!(gcs.download("results", "logs/job/7/none").is_none());
}
