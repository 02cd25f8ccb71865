//! The LKG answers recorded per generation of the index, so that replicas of `harness serve` agree
//! on them: one writer at a time (a Postgres advisory lock; SQLite has one writer anyway), and a
//! generation is only ever recorded after the ones before it.

use sqlx::Row;

use super::{Backend, Index, Result};

/// The advisory lock key of LKG recording (any constant: "lkg" in ASCII).
const LKG_LOCK: i64 = 0x6c6b67;

/// What [`Index::record_lkg`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LkgRecorded {
    Written,
    /// The same answer was already recorded for this generation (by another replica, say).
    Same,
    /// A later generation is recorded already: this answer is stale and was not written.
    Stale {
        recorded: i64,
    },
    /// This generation is recorded with a different answer: the computation is not a function of
    /// the index (a bug, or a commit history that moved in between), and the first answer stays.
    Conflict,
}

impl Index {
    /// A number that grows whenever any build is inserted or replaced (the sum of the jobs'
    /// generations).
    pub async fn index_generation(&self) -> Result<i64> {
        let row = sqlx::query("SELECT CAST(COALESCE(SUM(generation), 0) AS BIGINT) FROM jobs")
            .fetch_one(&self.pool)
            .await
            .map_err(self.err("read the index generation"))?;
        self.decode(|| row.try_get(0))
    }

    /// Records the LKG report computed from `generation` of the index, unless a later generation
    /// is recorded already.
    pub async fn record_lkg(&self, generation: i64, report: &str, now: i64) -> Result<LkgRecorded> {
        let mut tx = self.pool.begin().await.map_err(self.err("begin a transaction"))?;
        if self.backend == Backend::Postgres {
            // Held until the transaction ends: replicas record one at a time.
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(LKG_LOCK)
                .execute(&mut *tx)
                .await
                .map_err(self.err("take the LKG lock"))?;
        }
        // One statement that writes: SQLite takes its write lock here, before any read, so two
        // writers queue on the busy timeout instead of deadlocking on a read lock each.
        let inserted = sqlx::query(
            "INSERT INTO lkg_versions (generation, computed_at, report) SELECT $1, $2, $3 \
             WHERE NOT EXISTS (SELECT 1 FROM lkg_versions WHERE generation >= $1)",
        )
        .bind(generation)
        .bind(now)
        .bind(report)
        .execute(&mut *tx)
        .await
        .map_err(self.err("record the LKG"))?;
        let outcome = if inserted.rows_affected() == 1 {
            LkgRecorded::Written
        } else {
            let latest = sqlx::query("SELECT generation, report FROM lkg_versions ORDER BY generation DESC LIMIT 1")
                .fetch_one(&mut *tx)
                .await
                .map_err(self.err("read the recorded LKG"))?;
            let (recorded, stored): (i64, String) = self.decode(|| Ok((latest.try_get(0)?, latest.try_get(1)?)))?;
            match recorded {
                _ if recorded > generation => LkgRecorded::Stale { recorded },
                _ if stored == report => LkgRecorded::Same,
                _ => LkgRecorded::Conflict,
            }
        };
        tx.commit().await.map_err(self.err("commit the LKG record"))?;
        Ok(outcome)
    }

    /// The latest recorded LKG report: `(generation, report JSON)`.
    pub async fn latest_lkg(&self) -> Result<Option<(i64, String)>> {
        let row = sqlx::query("SELECT generation, report FROM lkg_versions ORDER BY generation DESC LIMIT 1")
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("read the recorded LKG"))?;
        row.map(|r| self.decode(|| Ok((r.try_get(0)?, r.try_get(1)?)))).transpose()
    }
}
