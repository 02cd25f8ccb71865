//! The index caught up with the store: a replica that dies between writing a build to the store and
//! indexing it leaves a build the index lacks (or holds unfinished while the store has its
//! `finished.json`). Serve indexes those when it starts and every `every` after, reading only what
//! the index lacks ([`publish::reindex_missing`]), and leaving alone the directories a live claim
//! says are being written.

use std::collections::HashSet;
use std::time::Duration;

use tracing::{info, warn};

use super::metrics::{Metrics, ResultLabel};
use results::index::Index;
use results::publish::{self, Reindexed};
use results::record::ReadBuildOptions;
use results::store::ResultStore;
use results::unix_now;

/// Reconciles now, then every `every` (never again when it is zero).
pub async fn run(store: ResultStore, index: Index, every: Duration, lease: Duration, metrics: std::sync::Arc<Metrics>) {
    loop {
        match pass(&store, &index, lease).await {
            Ok(report) => record(&report, &metrics),
            Err(error) => {
                metrics.reconciled.get_or_create(&ResultLabel { result: "error" }).inc();
                warn!("indexing what the store holds and the index lacks failed: {error}");
            }
        }
        if every.is_zero() {
            return;
        }
        tokio::time::sleep(every).await;
    }
}

/// One reconciliation: as `harness index` reads builds (one without finished.json is running, for
/// a day), but only those the index lacks.
async fn pass(store: &ResultStore, index: &Index, lease: Duration) -> anyhow::Result<Reindexed> {
    let since = unix_now().saturating_sub(lease.as_secs() as i64);
    let being_written: HashSet<String> = index.claims_being_written(since).await?.into_iter().collect();
    Ok(publish::reindex_missing(store, index, &ReadBuildOptions::default(), &being_written).await?)
}

fn record(report: &Reindexed, metrics: &Metrics) {
    for (result, count) in
        [("inserted", report.inserted), ("replaced", report.replaced), ("failed", report.failed.len())]
    {
        metrics.reconciled.get_or_create(&ResultLabel { result }).inc_by(count as u64);
    }
    if report.inserted + report.replaced > 0 {
        info!(
            "indexed what the store held and the index lacked: {} new, {} replaced",
            report.inserted, report.replaced
        );
    }
    for failed in &report.failed {
        warn!("a build in the store cannot be indexed: {failed}");
    }
}
