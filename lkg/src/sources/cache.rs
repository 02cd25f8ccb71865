//! The cache behind [`GitHub`](super::GitHub): GitHub's answers by request, with their ETags, so
//! a request can be made conditional (a `304 Not Modified` costs no rate limit) and a cached
//! history can still be served while GitHub fails. In memory here; a database-backed cache
//! implements the same trait.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One cached answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedResponse {
    pub etag: Option<String>,
    /// The URL of the next page (from the `Link` header), if any.
    pub next: Option<String>,
    pub body: String,
    /// When it was fetched or last confirmed (unix seconds).
    pub fetched_at: u64,
}

/// Cached answers by key (the request URL).
#[async_trait]
pub trait HistoryCache: Send + Sync {
    async fn get(&self, key: &str) -> Option<CachedResponse>;
    async fn put(&self, key: &str, response: CachedResponse);
}

/// A [`HistoryCache`] in memory, for one process.
#[derive(Debug, Default)]
pub struct MemoryCache {
    entries: Mutex<HashMap<String, CachedResponse>>,
}

impl MemoryCache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.entries.lock().expect("cache lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl HistoryCache for MemoryCache {
    async fn get(&self, key: &str) -> Option<CachedResponse> {
        self.entries.lock().expect("cache lock").get(key).cloned()
    }

    async fn put(&self, key: &str, response: CachedResponse) {
        self.entries.lock().expect("cache lock").insert(key.to_owned(), response);
    }
}
