//! The GitHub history cache kept in the SQL index (table `history_cache`), so every process that
//! loads the LKG, and every reload of `harness serve`, makes conditional requests and can serve a
//! cached history while GitHub fails.

use async_trait::async_trait;
use lkg::sources::{CachedResponse, HistoryCache};
use tracing::warn;

use crate::index::Index;

pub struct IndexCache(pub Index);

#[async_trait]
impl HistoryCache for IndexCache {
    async fn get(&self, key: &str) -> Option<CachedResponse> {
        match self.0.cached_history(key).await {
            Ok(found) => found.map(|(etag, next, body, fetched_at)| CachedResponse {
                etag,
                next,
                body,
                fetched_at: u64::try_from(fetched_at).unwrap_or_default(),
            }),
            Err(error) => {
                warn!("the history cache could not be read, fetching again: {error}");
                None
            }
        }
    }

    async fn put(&self, key: &str, response: CachedResponse) {
        let fetched_at = i64::try_from(response.fetched_at).unwrap_or(i64::MAX);
        let written = self
            .0
            .cache_history(key, response.etag.as_deref(), response.next.as_deref(), &response.body, fetched_at)
            .await;
        if let Err(error) = written {
            warn!("the history cache could not be written (the next load fetches again): {error}");
        }
    }
}
