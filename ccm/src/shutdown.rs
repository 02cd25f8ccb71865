//! When the CCM stops: one [`Stop`], fed by the app's wait for SIGTERM or SIGINT, and a
//! [`Shutdown`] per controller and server, each finishing what it is doing and returning once the
//! stop is requested.

use std::future::Future;

use tokio::sync::watch;

/// Requests the stop of every [`Shutdown`] made with it (see [`channel`]).
#[derive(Debug)]
pub struct Stop(watch::Sender<bool>);

/// What a controller or server watches to know when to stop; clone one per watcher.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// A new stop and what watches it. Dropping the [`Stop`] counts as requesting it: nothing could
/// request it afterwards.
pub fn channel() -> (Stop, Shutdown) {
    let (sender, receiver) = watch::channel(false);
    (Stop(sender), Shutdown(receiver))
}

impl Stop {
    pub fn request(&self) {
        self.0.send_replace(true);
    }
}

impl Shutdown {
    /// Resolves once the stop is requested; a future of its own, so kube's
    /// `Controller::graceful_shutdown_on` can own it.
    pub fn requested(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut receiver = self.0.clone();
        async move {
            // An error means the Stop is gone, which counts as a request.
            let _ = receiver.wait_for(|stop| *stop).await;
        }
    }

    pub fn is_requested(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn every_watcher_sees_one_request() {
        let (stop, shutdown) = channel();
        let other = shutdown.clone();
        let waiting = tokio::spawn(other.requested());
        assert!(!shutdown.is_requested());
        stop.request();
        tokio::time::timeout(Duration::from_secs(1), waiting).await.expect("the waiter stops").unwrap();
        assert!(shutdown.is_requested());
        shutdown.requested().await;
    }

    #[tokio::test]
    async fn a_dropped_stop_counts_as_requested() {
        let (stop, shutdown) = channel();
        drop(stop);
        assert!(shutdown.is_requested());
        tokio::time::timeout(Duration::from_secs(1), shutdown.requested()).await.expect("resolves");
    }
}
