//! Where the harness keeps what outlives one command, each root overridable by its variable (the
//! tests give each run its own): clusters' state and the caches. Here, below every crate that
//! reads them, so a deployer that runs no local cluster finds its state dir without linking
//! `local-cluster`.

use std::path::PathBuf;

/// The harness's directory under every user directory.
const NAME: &str = "cloud-provider-harness";

/// Where clusters keep their state (local clusters, the kind and kubetest2 deployers' kubeconfigs):
/// `$HARNESS_STATE_DIR`, else `<user state dir>/cloud-provider-harness`
/// (`~/.local/state/cloud-provider-harness`).
pub fn state_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("HARNESS_STATE_DIR") {
        return PathBuf::from(dir);
    }
    dirs::state_dir().or_else(dirs::data_local_dir).unwrap_or_else(std::env::temp_dir).join(NAME)
}

/// The harness's cache root (toolchains, node images, downloaded packages): `$HARNESS_CACHE_DIR`,
/// else `<user cache dir>/cloud-provider-harness`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("HARNESS_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join(NAME)
}
