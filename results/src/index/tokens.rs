//! Publish tokens of the ingestion API: only their SHA-256 is stored (see `crate::tokens`).

use sqlx::Row;

use super::{Index, Result};

/// A token as stored: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenInfo {
    pub id: i64,
    pub provider: String,
    pub description: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

const TOKEN_COLUMNS: &str = "id, provider, description, created_at, revoked_at";

impl Index {
    /// Stores a new token's hash; returns its id.
    pub async fn add_token(&self, provider: &str, hash: &str, description: &str, now: i64) -> Result<i64> {
        let row = sqlx::query(
            "INSERT INTO tokens (provider, hash, description, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(provider)
        .bind(hash)
        .bind(description)
        .bind(now)
        .fetch_one(&self.pool)
        .await
        .map_err(self.err("store the token"))?;
        self.decode(|| row.try_get(0))
    }

    /// Revokes a token; `false` when there is no valid token with that id.
    pub async fn revoke_token(&self, id: i64, now: i64) -> Result<bool> {
        let done = sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(now)
            .bind(id)
            .execute(&self.pool)
            .await
            .map_err(self.err("revoke the token"))?;
        Ok(done.rows_affected() == 1)
    }

    /// Every token, valid or revoked, oldest first.
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY id");
        let rows =
            sqlx::query(sqlx::AssertSqlSafe(sql)).fetch_all(&self.pool).await.map_err(self.err("list tokens"))?;
        rows.iter().map(|r| self.token_row(r)).collect()
    }

    /// The token with this hash, valid or revoked.
    pub async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenInfo>> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(hash)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("look the token up"))?;
        row.map(|r| self.token_row(&r)).transpose()
    }

    fn token_row(&self, r: &sqlx::any::AnyRow) -> Result<TokenInfo> {
        self.decode(|| {
            Ok(TokenInfo {
                id: r.try_get(0)?,
                provider: r.try_get(1)?,
                description: r.try_get(2)?,
                created_at: r.try_get(3)?,
                revoked_at: r.try_get(4)?,
            })
        })
    }

    /// The provider the index knows a job by (from its builds), if any.
    pub async fn job_provider(&self, job: &str) -> Result<Option<String>> {
        let row = sqlx::query("SELECT p.name FROM jobs j JOIN providers p ON p.id = j.provider_id WHERE j.name = $1")
            .bind(job)
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err("read the job's provider"))?;
        row.map(|r| self.decode(|| r.try_get(0))).transpose()
    }
}
