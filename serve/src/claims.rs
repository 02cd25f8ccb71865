//! Who writes a build directory: one upload's content at a time, across replicas, by a claim in the
//! database ([`Index::claim_build`]) taken before anything is written.
//!
//! - Nobody holds a claim: this upload takes it and writes.
//! - The same content holds it: this upload writes too (a retry after its writer died resumes; two
//!   writers of the same bytes write the same build), or, once it is done, answers from the index.
//! - Other content holds it, done and finished: the build is published; same files or `409`.
//! - Other content holds it, done and unfinished (a post without `finished.json`): this upload
//!   takes it over and replaces that build.
//! - Other content is being written: this upload waits for it to be done, for at most `wait`
//!   (`503` after). A writer renews its claim every quarter `lease` ([`hold`]); a claim not
//!   renewed for a `lease` is taken over (its writer died mid-write, or its write failed).
//!
//! A claim is never given up while its content may still be written: two uploads of the same
//! content share it, and the one that fails must not open the directory to other content while
//! the other writes.

use std::future::Future;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use results::index::{Claim, ClaimSeen, Index, IndexError};
use results::unix_now;

/// How long claims last, and how long an upload waits for another's.
#[derive(Debug, Clone, Copy)]
pub struct ClaimTimes {
    /// A claim not renewed for this long is taken over.
    pub lease: Duration,
    /// The longest an upload waits for another content's writer to finish.
    pub wait: Duration,
}

impl Default for ClaimTimes {
    fn default() -> Self {
        ClaimTimes { lease: Duration::from_secs(60), wait: Duration::from_secs(30) }
    }
}

/// What an upload may do at its build directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// It holds the claim: it writes the build.
    Write,
    /// Its content was written and indexed before.
    Done,
    /// Other content was written there, finished.
    Finished,
    /// Other content is still being written, longer than it waited.
    Busy,
}

/// Takes the claim on `claim.path`, or says why not (see the module doc).
pub async fn acquire(index: &Index, claim: &Claim<'_>, times: ClaimTimes) -> Result<Acquired, IndexError> {
    let deadline = Instant::now() + times.wait;
    let mut pause = Duration::from_millis(10);
    loop {
        let now = unix_now();
        let Some(seen) = index.claim_build(claim, now).await? else { return Ok(Acquired::Write) };
        if let Some(decided) = decide(claim, &seen) {
            return Ok(decided);
        }
        let replaceable = seen.done_at.is_some() || !is_live(&seen, now, times.lease);
        if replaceable {
            if index.take_over_claim(claim, &seen, now).await? {
                return Ok(Acquired::Write);
            }
            continue;
        }
        if Instant::now() >= deadline {
            return Ok(Acquired::Busy);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

/// What `seen` decides for `claim` by itself; `None` when it must be taken over or waited for.
fn decide(claim: &Claim<'_>, seen: &ClaimSeen) -> Option<Acquired> {
    if seen.digest == claim.digest {
        return Some(if seen.done_at.is_some() { Acquired::Done } else { Acquired::Write });
    }
    if seen.done_at.is_some() && seen.finished {
        return Some(Acquired::Finished);
    }
    None
}

/// A claim being written whose writer renewed it within the lease.
fn is_live(seen: &ClaimSeen, now: i64, lease: Duration) -> bool {
    seen.done_at.is_none() && now.saturating_sub(seen.claimed_at) < lease.as_secs() as i64
}

/// Runs `work` (the writing of the claimed build), renewing the claim every quarter lease.
pub async fn hold<T>(index: &Index, claim: &Claim<'_>, lease: Duration, work: impl Future<Output = T>) -> T {
    let mut renew = tokio::time::interval((lease / 4).max(Duration::from_millis(100)));
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    renew.tick().await;
    tokio::pin!(work);
    loop {
        tokio::select! {
            done = &mut work => return done,
            _ = renew.tick() => {
                if let Err(error) = index.renew_claim(claim, unix_now()).await {
                    tracing::warn!(path = claim.path, "renewing the claim on a build being written failed: {error}");
                }
            }
        }
    }
}

/// The digest of an upload's files (path and bytes, in path order): what its claim compares.
pub fn digest(files: &[upload::UploadedFile]) -> String {
    let mut sorted: Vec<&upload::UploadedFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut digest = Sha256::new();
    for file in sorted {
        for part in [file.path.as_bytes(), &file.bytes[..]] {
            digest.update((part.len() as u64).to_le_bytes());
            digest.update(part);
        }
    }
    hex::encode(digest.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn sqlite() -> (tempfile::TempDir, Index) {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&format!("sqlite://{}", dir.path().join("index.sqlite").display())).await.unwrap();
        (dir, index)
    }

    const PATH: &str = "logs/ci-a/1";

    fn claim(digest: &str, finished: bool) -> Claim<'_> {
        Claim { path: PATH, digest, finished }
    }

    fn quick() -> ClaimTimes {
        ClaimTimes { lease: Duration::from_secs(60), wait: Duration::from_millis(300) }
    }

    #[tokio::test]
    async fn one_content_writes_at_a_time_and_a_finished_build_is_never_replaced() {
        let (_dir, index) = sqlite().await;
        let (a, b) = (claim("a", true), claim("b", true));
        assert_eq!(acquire(&index, &a, quick()).await.unwrap(), Acquired::Write);
        // The same content again writes too (a retry); other content waits, then gives up.
        assert_eq!(acquire(&index, &a, quick()).await.unwrap(), Acquired::Write);
        let started = Instant::now();
        assert_eq!(acquire(&index, &b, quick()).await.unwrap(), Acquired::Busy);
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(index.finish_claim(&a, unix_now()).await.unwrap());
        assert_eq!(acquire(&index, &a, quick()).await.unwrap(), Acquired::Done);
        assert_eq!(acquire(&index, &b, quick()).await.unwrap(), Acquired::Finished);
    }

    #[tokio::test]
    async fn a_waiting_upload_goes_on_once_the_writer_is_done() {
        let (_dir, index) = sqlite().await;
        let a = claim("a", true);
        assert_eq!(acquire(&index, &a, quick()).await.unwrap(), Acquired::Write);
        let waiting = {
            let index = index.clone();
            tokio::spawn(async move {
                let times = ClaimTimes { wait: Duration::from_secs(10), ..quick() };
                acquire(&index, &claim("b", true), times).await.unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiting.is_finished());
        index.finish_claim(&a, unix_now()).await.unwrap();
        assert_eq!(waiting.await.unwrap(), Acquired::Finished);
        // A released claim (its build was not written) is anyone's.
        let c = Claim { path: "logs/ci-a/2", digest: "c", finished: true };
        let d = Claim { path: "logs/ci-a/2", digest: "d", finished: true };
        assert_eq!(acquire(&index, &c, quick()).await.unwrap(), Acquired::Write);
        index.release_claim(&c).await.unwrap();
        assert_eq!(acquire(&index, &d, quick()).await.unwrap(), Acquired::Write);
    }

    #[tokio::test]
    async fn an_unfinished_build_is_replaced_and_a_dead_writers_claim_taken_over() {
        let (_dir, index) = sqlite().await;
        let (early, last) = (claim("early", false), claim("last", true));
        assert_eq!(acquire(&index, &early, quick()).await.unwrap(), Acquired::Write);
        index.finish_claim(&early, unix_now()).await.unwrap();
        assert_eq!(acquire(&index, &last, quick()).await.unwrap(), Acquired::Write);
        assert_eq!(index.build_claim(PATH).await.unwrap().unwrap().digest, "last");
        // `last`'s writer dies: not renewed for a lease, its claim is taken over.
        let short = ClaimTimes { lease: Duration::from_secs(1), wait: Duration::from_secs(5) };
        assert_eq!(acquire(&index, &claim("other", true), short).await.unwrap(), Acquired::Write);
        assert_eq!(index.build_claim(PATH).await.unwrap().unwrap().digest, "other");
        // A writer that renews its claim keeps it for as long as it writes.
        let two = ClaimTimes { lease: Duration::from_secs(2), wait: Duration::from_secs(4) };
        let writer = Claim { path: "logs/ci-a/3", digest: "writer", finished: true };
        let rival = Claim { path: "logs/ci-a/3", digest: "rival", finished: true };
        assert_eq!(acquire(&index, &writer, two).await.unwrap(), Acquired::Write);
        let writing = hold(&index, &writer, two.lease, tokio::time::sleep(Duration::from_secs(5)));
        let (_, rival_got) = tokio::join!(writing, acquire(&index, &rival, two));
        assert_eq!(rival_got.unwrap(), Acquired::Busy);
    }

    #[test]
    fn the_digest_is_of_paths_and_bytes_in_any_order() {
        let file = |path: &str, bytes: &'static [u8]| upload::UploadedFile { path: path.into(), bytes: bytes.into() };
        let one = digest(&[file("a", b"1"), file("b", b"2")]);
        assert_eq!(one, digest(&[file("b", b"2"), file("a", b"1")]));
        assert_ne!(one, digest(&[file("a", b"1"), file("b", b"3")]));
        assert_ne!(digest(&[file("ab", b"")]), digest(&[file("a", b"b")]));
    }
}
