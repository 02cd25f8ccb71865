//! Publish tokens: a bearer token per provider for the ingestion API (`POST /api/v1/builds`).
//!
//! A token is `chp_` and 64 hex digits of the operating system's randomness, shown once when it
//! is made. The index keeps only its SHA-256: a leaked database does not leak a token, and since
//! the token is random a plain hash is enough (no salt or slow hash needed, as with passwords).
//! Every request looks its token up, so a revocation holds at once on every replica.

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::index::{Index, TokenInfo};
use crate::unix_now;
use config::ProvidersConfig;

const PREFIX: &str = "chp_";

/// A new token and its id.
pub struct Created {
    pub id: i64,
    pub token: String,
}

/// Makes a token for `provider` (one of providers.yaml) and stores its hash.
pub async fn create(index: &Index, config: &ProvidersConfig, provider: &str, description: &str) -> Result<Created> {
    if config.provider(provider).is_none() {
        bail!(
            "provider {provider:?} is not in {}: use one of {}",
            config.source.display(),
            config.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).context("reading the operating system's randomness")?;
    let token = format!("{PREFIX}{}", hex::encode(secret));
    let id = index.add_token(provider, &hash(&token), description, unix_now()).await?;
    Ok(Created { id, token })
}

/// The valid token a request presented, if any: `None` for an unknown or revoked one.
pub async fn authenticate(index: &Index, token: &str) -> crate::index::Result<Option<TokenInfo>> {
    if !token.starts_with(PREFIX) {
        return Ok(None);
    }
    let found = index.token_by_hash(&hash(token)).await?;
    Ok(found.filter(|t| t.revoked_at.is_none()))
}

/// The SHA-256 of a token, in hex: what the index keeps.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_token_authenticates_until_revoked_and_only_its_hash_is_stored() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open(&format!("sqlite://{}", dir.path().join("i.sqlite").display())).await.unwrap();
        let config = ProvidersConfig::bundled();
        let provider = &config.providers[0].name;
        let created = create(&index, &config, provider, "CI of the local provider").await.unwrap();
        assert!(created.token.starts_with("chp_") && created.token.len() == 68, "{}", created.token);

        let stored = index.tokens().await.unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(&stored[0].provider, provider);
        assert_eq!(index.token_by_hash(&hash(&created.token)).await.unwrap().unwrap().id, created.id);
        let bytes = std::fs::read(dir.path().join("i.sqlite")).unwrap();
        let secret = created.token.as_bytes();
        assert!(!bytes.windows(secret.len()).any(|w| w == secret), "the token itself was stored");

        assert_eq!(authenticate(&index, &created.token).await.unwrap().unwrap().provider, *provider);
        assert!(authenticate(&index, "chp_0000").await.unwrap().is_none());
        assert!(authenticate(&index, "not-a-token").await.unwrap().is_none());
        assert!(index.revoke_token(created.id, unix_now()).await.unwrap());
        assert!(!index.revoke_token(created.id, unix_now()).await.unwrap(), "revoked twice");
        assert!(authenticate(&index, &created.token).await.unwrap().is_none(), "a revoked token still works");

        let unknown = create(&index, &config, "no-such-provider", "").await.err().unwrap().to_string();
        assert!(unknown.contains("no-such-provider") && unknown.contains(provider.as_str()), "{unknown}");
    }
}
