//! The upload capacity of `POST /api/v1/builds`: at most `capacity` bodies read at once (memory
//! stays under that many × the body limit), no provider holding more than its `share` of them, so
//! one provider's stalled or slow uploads never starve the others; and a deadline on each wait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct Uploads {
    total: Arc<Semaphore>,
    capacity: usize,
    share: usize,
    providers: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// The longest a request waits for a place.
    wait: Duration,
}

/// A place to read one upload; given back when dropped.
pub struct Permit {
    _provider: OwnedSemaphorePermit,
    _total: OwnedSemaphorePermit,
}

impl Uploads {
    /// `capacity` places in all, at most `share` of them for one provider (both at least 1).
    pub fn new(capacity: usize, share: usize, wait: Duration) -> Self {
        let capacity = capacity.max(1);
        Uploads {
            total: Arc::new(Semaphore::new(capacity)),
            capacity,
            share: share.clamp(1, capacity),
            providers: Mutex::default(),
            wait,
        }
    }

    /// The default share: half the capacity, so a second provider always finds room.
    pub fn default_share(capacity: usize) -> usize {
        capacity.div_ceil(2).max(1)
    }

    /// A place for one of `provider`'s uploads: first within its share, then among all; `None`
    /// when none came within the wait.
    pub async fn acquire(&self, provider: &str) -> Option<Permit> {
        let own = self.provider(provider);
        let places = async {
            let provider = own.acquire_owned().await.expect("never closed");
            let total = self.total.clone().acquire_owned().await.expect("never closed");
            Permit { _provider: provider, _total: total }
        };
        tokio::time::timeout(self.wait, places).await.ok()
    }

    fn provider(&self, provider: &str) -> Arc<Semaphore> {
        let mut providers = self.providers.lock().unwrap_or_else(|e| e.into_inner());
        providers.entry(provider.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.share))).clone()
    }

    /// Uploads being read now.
    pub fn in_use(&self) -> usize {
        self.capacity - self.total.available_permits()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn share(&self) -> usize {
        self.share
    }

    /// The wait a refused request is told to retry after.
    pub fn wait(&self) -> Duration {
        self.wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_provider_takes_at_most_its_share_and_the_others_still_get_places() {
        let uploads = Uploads::new(4, 2, Duration::from_millis(50));
        let alpha: Vec<Permit> = vec![uploads.acquire("alpha").await.unwrap(), uploads.acquire("alpha").await.unwrap()];
        assert!(uploads.acquire("alpha").await.is_none(), "alpha is over its share");
        let beta = [uploads.acquire("beta").await.unwrap(), uploads.acquire("beta").await.unwrap()];
        assert_eq!(uploads.in_use(), 4);
        assert!(uploads.acquire("gamma").await.is_none(), "every place is taken");
        drop(alpha);
        assert!(uploads.acquire("gamma").await.is_some());
        drop(beta);
        assert_eq!(uploads.in_use(), 0);
        assert_eq!(Uploads::default_share(32), 16);
        assert_eq!(Uploads::default_share(1), 1);
    }
}
