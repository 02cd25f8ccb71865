//! A cluster while [`super::up`] starts it: one guard from the first process to the last step.
//! Whatever ends `up` early — an error, a panic, or the caller dropping its future (Ctrl-C) — stops
//! every process the cluster recorded and removes its state.

use std::fs;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use super::{LocalCluster, process, real};

pub(crate) struct Launch {
    /// `None` once `up` got to the end and handed the cluster over.
    cluster: Option<LocalCluster>,
}

impl Launch {
    pub(crate) fn new(cluster: LocalCluster) -> Self {
        Launch { cluster: Some(cluster) }
    }

    /// The cluster is up: it is the caller's now, and dropping the launch stops nothing.
    pub(crate) fn finish(mut self) -> LocalCluster {
        self.cluster.take().expect("a launch finishes once")
    }
}

impl Deref for Launch {
    type Target = LocalCluster;

    fn deref(&self) -> &LocalCluster {
        self.cluster.as_ref().expect("a launch is used until it finishes")
    }
}

impl DerefMut for Launch {
    fn deref_mut(&mut self) -> &mut LocalCluster {
        self.cluster.as_mut().expect("a launch is used until it finishes")
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        let Some(cluster) = self.cluster.take() else { return };
        tracing::info!("stopping the partly started cluster in {}", cluster.dir.display());
        super::stop_processes(&cluster.dir, &cluster.state, Duration::from_secs(3));
        process::sweep(&cluster.dir);
        real::cleanup(&cluster.dir);
        let _ = fs::remove_dir_all(&cluster.dir);
    }
}
