//! Bounded waiting: every wait names what it awaited and what it last saw when it gives up.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::Verdict;

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(500);

/// Polls `check` until it returns `Ok`, or fails once `timeout` has passed. `check` answers
/// `Err(seen)` while the condition does not hold yet, `seen` describing the current state; an API
/// error counts as not yet too (the cloud and the API server may be slow, not broken).
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, Verdict>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let seen = match check().await {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            return Err(Verdict::Failed(format!(
                "timed out after {} waiting for {what}; last seen: {seen}",
                humantime::format_duration(timeout)
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Watches for `window` that `check` keeps holding (`Ok`); the first `Err(seen)` fails at once
/// with what should not have happened and what was seen.
pub async fn holds<F, Fut>(what: &str, window: Duration, mut check: F) -> Result<(), Verdict>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + window;
    loop {
        if let Err(seen) = check().await {
            return Err(Verdict::Failed(format!("expected {what}, but saw {seen}")));
        }
        if Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn until_returns_the_value_or_names_what_it_waited_for_and_saw() {
        let calls = AtomicU32::new(0);
        let value = until("three calls", Duration::from_secs(10), || async {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 3 { Ok(n) } else { Err(format!("call {n}")) }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);

        let err = until("the moon", Duration::from_secs(2), || async { Err::<(), _>("no moon".to_owned()) })
            .await
            .unwrap_err();
        assert_eq!(err, Verdict::Failed("timed out after 2s waiting for the moon; last seen: no moon".into()));
    }

    #[tokio::test(start_paused = true)]
    async fn holds_fails_on_the_first_violation() {
        let calls = AtomicU32::new(0);
        let err = holds("no finalizer", Duration::from_secs(10), || async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 { Ok(()) } else { Err("finalizer x".to_owned()) }
        })
        .await
        .unwrap_err();
        assert_eq!(err, Verdict::Failed("expected no finalizer, but saw finalizer x".into()));
        holds("quiet", Duration::from_secs(3), || async { Ok(()) }).await.unwrap();
    }
}
