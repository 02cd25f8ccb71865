//! Shared by the end-to-end tests: clusters that are always brought down, and waiting with a
//! message that says what was awaited.

#![allow(dead_code)]

pub mod builds;
pub mod fake_s3;
pub mod real;

pub use testing::{emulator, fake_gcs, go_tools, testgrid};

use std::future::Future;
use std::time::{Duration, Instant};

use local_cluster::{LocalCluster, UpOptions, process};
use toolchain::Release;

/// A cluster that is brought down when the test ends, also when an assertion fails.
pub struct TestCluster(pub Option<LocalCluster>);

impl std::ops::Deref for TestCluster {
    type Target = LocalCluster;
    fn deref(&self) -> &LocalCluster {
        self.0.as_ref().expect("not yet torn down")
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Some(cluster) = self.0.take() {
            let _ = cluster.down();
        }
    }
}

pub async fn bring_up(options: UpOptions) -> TestCluster {
    let name = options.name.clone();
    // A cluster an earlier, killed run of this test left running would make `up` refuse.
    local_cluster::down(&name).expect("clearing a leftover cluster");
    TestCluster(Some(
        local_cluster::up(options).await.unwrap_or_else(|e| panic!("cluster {name} did not come up: {e}")),
    ))
}

pub fn options(name: &str, release: Release, nodes: u32) -> UpOptions {
    let mut options = UpOptions::new(name, release);
    options.nodes = nodes;
    options
}

pub fn assert_torn_down(mut cluster: TestCluster) {
    let cluster = cluster.0.take().expect("not yet torn down");
    let dir = cluster.dir.clone();
    cluster.down().expect("down");
    assert!(process::find_by_marker(&dir).is_empty(), "processes of {} survived down", dir.display());
    assert!(!dir.exists(), "{} survived down", dir.display());
}

/// Polls `check` until it returns `Some`, or panics after `timeout` saying what was awaited.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
