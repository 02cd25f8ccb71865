//! Claims, decided in the database so that replicas of `harness serve` agree: which upload writes a
//! build directory (`build_claims`, one row per directory), and which provider a new job belongs to
//! (its `jobs` row). Each is one statement that writes: the first insert wins, on Postgres (a
//! unique key) as on SQLite (one writer at a time). What to make of a claim is
//! `serve::claims`'s.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::{Index, Result, get_bool};

/// An upload's claim on a build directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    /// The build directory (`logs/<job>/<build>`, `pr-logs/pull/…`), as `builds.path`.
    pub path: &'a str,
    /// SHA-256 of the upload's files.
    pub digest: &'a str,
    /// Whether the upload holds `finished.json`.
    pub finished: bool,
}

/// A claim as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSeen {
    pub digest: String,
    pub finished: bool,
    /// When it was taken or last renewed (unix seconds).
    pub claimed_at: i64,
    /// When its build was written and indexed; `None` while it is being written.
    pub done_at: Option<i64>,
}

impl Index {
    /// Takes the claim on `claim.path` if nobody holds one: `None` then; else the claim there is.
    pub async fn claim_build(&self, claim: &Claim<'_>, now: i64) -> Result<Option<ClaimSeen>> {
        loop {
            let inserted = sqlx::query(
                "INSERT INTO build_claims (path, digest, finished, claimed_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (path) DO NOTHING RETURNING path",
            )
            .bind(claim.path)
            .bind(claim.digest)
            .bind(claim.finished)
            .bind(now)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("claim the build"))?;
            if inserted.is_some() {
                return Ok(None);
            }
            // Released between the two statements: try again.
            if let Some(seen) = self.build_claim(claim.path).await? {
                return Ok(Some(seen));
            }
        }
    }

    /// The claim on a build directory, if any.
    pub async fn build_claim(&self, path: &str) -> Result<Option<ClaimSeen>> {
        let row = sqlx::query("SELECT digest, finished, claimed_at, done_at FROM build_claims WHERE path = $1")
            .bind(path)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("read the build's claim"))?;
        row.map(|r| self.claim_row(&r)).transpose()
    }

    /// Replaces the claim `seen` (one whose writer stopped renewing it, or a build written
    /// unfinished) with `claim`: `true` when this call did, `false` when the claim changed since
    /// it was seen (another took it over, or its writer renewed it).
    pub async fn take_over_claim(&self, claim: &Claim<'_>, seen: &ClaimSeen, now: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE build_claims SET digest = $2, finished = $3, claimed_at = $4, done_at = NULL \
             WHERE path = $1 AND digest = $5 AND claimed_at = $6 \
             AND (done_at = $7 OR (done_at IS NULL AND $8))",
        )
        .bind(claim.path)
        .bind(claim.digest)
        .bind(claim.finished)
        .bind(now)
        .bind(&seen.digest)
        .bind(seen.claimed_at)
        .bind(seen.done_at.unwrap_or(-1))
        .bind(seen.done_at.is_none())
        .execute(&self.pool)
        .await
        .map_err(self.err("take the build's claim over"))?;
        Ok(done.rows_affected() == 1)
    }

    /// Tells the others this claim's writer is still at work: `false` when the claim is no
    /// longer its own.
    pub async fn renew_claim(&self, claim: &Claim<'_>, now: i64) -> Result<bool> {
        let done =
            sqlx::query("UPDATE build_claims SET claimed_at = $3 WHERE path = $1 AND digest = $2 AND done_at IS NULL")
                .bind(claim.path)
                .bind(claim.digest)
                .bind(now)
                .execute(&self.pool)
                .await
                .map_err(self.err("renew the build's claim"))?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks the claim's build written and indexed.
    pub async fn finish_claim(&self, claim: &Claim<'_>, now: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE build_claims SET claimed_at = $3, done_at = $3 WHERE path = $1 AND digest = $2 AND done_at IS NULL",
        )
        .bind(claim.path)
        .bind(claim.digest)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(self.err("finish the build's claim"))?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives up a claim whose build was not written (the store failed, say).
    pub async fn release_claim(&self, claim: &Claim<'_>) -> Result<()> {
        sqlx::query("DELETE FROM build_claims WHERE path = $1 AND digest = $2 AND done_at IS NULL")
            .bind(claim.path)
            .bind(claim.digest)
            .execute(&self.pool)
            .await
            .map_err(self.err("release the build's claim"))?;
        Ok(())
    }

    /// The build directories being written now: claims not done, renewed at or after `since`.
    pub async fn claims_being_written(&self, since: i64) -> Result<Vec<String>> {
        let rows = sqlx::query("SELECT path FROM build_claims WHERE done_at IS NULL AND claimed_at >= $1")
            .bind(since)
            .fetch_all(&self.pool)
            .await
            .map_err(self.err("list the builds being written"))?;
        rows.iter().map(|r| self.decode(|| r.try_get(0))).collect()
    }

    /// Gives a job to `provider` unless it has a provider already, in one transaction whose first
    /// statement writes: of concurrent claims on a new job, the first wins. The job's provider
    /// after the claim.
    pub async fn claim_job(&self, job: &str, provider: &str) -> Result<String> {
        let mut tx = self.pool.begin().await.map_err(self.err("begin a transaction"))?;
        let job_id = self.upsert_job(&mut tx, job, Some(provider)).await?;
        let row = sqlx::query("SELECT p.name FROM jobs j JOIN providers p ON p.id = j.provider_id WHERE j.id = $1")
            .bind(job_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(self.err("read the job's provider"))?;
        tx.commit().await.map_err(self.err("commit the job's claim"))?;
        self.decode(|| row.try_get(0))
    }

    fn claim_row(&self, r: &AnyRow) -> Result<ClaimSeen> {
        self.decode(|| {
            Ok(ClaimSeen {
                digest: r.try_get("digest")?,
                finished: get_bool(r, "finished")?.unwrap_or(false),
                claimed_at: r.try_get("claimed_at")?,
                done_at: r.try_get("done_at")?,
            })
        })
    }
}
