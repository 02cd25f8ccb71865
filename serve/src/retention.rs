//! Results retention (`--keep-results`): on start and every hour, the passes and skips of builds
//! that started longer ago than the retention are expired from the index
//! ([`Index::expire_results`]); builds, verdicts, failures and packed results stay, and the store is
//! never touched.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::metrics::Metrics;
use results::index::Index;
use results::unix_now;

/// How often results are expired.
const EVERY: Duration = Duration::from_secs(3600);

/// Expires what is older than `keep` now, then every hour.
pub async fn run(index: Index, keep: Duration, metrics: Arc<Metrics>) {
    loop {
        let now = unix_now();
        let before = now.saturating_sub(i64::try_from(keep.as_secs()).unwrap_or(i64::MAX));
        match index.expire_results(before, now).await {
            Ok(expired) => {
                metrics.expired_results.inc_by(expired.results);
                if expired.builds > 0 {
                    info!(
                        "expired {} passed or skipped result(s) of {} build(s) older than {} (--keep-results)",
                        expired.results,
                        expired.builds,
                        humantime::format_duration(keep)
                    );
                }
            }
            Err(error) => warn!("expiring results older than --keep-results failed: {error}"),
        }
        tokio::time::sleep(EVERY).await;
    }
}
