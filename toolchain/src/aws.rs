//! What the `aws` provider needs beyond the Kubernetes toolchain, installed by `harness toolchain
//! install --all` and cached under the cache dir:
//!
//! - cloud-provider-aws's `aws-cloud-controller-manager`, built unmodified from the Go module proxy
//!   at the release pinned for each Kubernetes minor in `tools/aws/v1.<minor>/` (`tools/aws/pin.sh`),
//!   stamped with its version as upstream's Makefile does: `<cache>/providers/aws/<version>/bin/`;
//! - moto's server (`moto[server]` from PyPI, every package pinned in
//!   `tools/aws/moto-requirements.txt`) in a virtualenv: `<cache>/moto/<version>/venv/`.
//!
//! Both are built in place of a `.partial` (the CCM) or marked complete by a last file written
//! (moto: a virtualenv cannot move), so a cache entry is whole or rebuilt.

use std::fs;
use std::path::{Path, PathBuf};

use super::pins::GoModule;
use super::provider_ccm::ProviderCcm;
use super::virtualenv::Virtualenv;
use super::{Result, ToolchainError, cache_root, io_err};

macro_rules! aws_module {
    ($dir:literal) => {
        GoModule {
            dir: concat!("aws-", $dir),
            go_mod: include_str!(concat!("../../tools/aws/", $dir, "/go.mod")),
            go_sum: include_str!(concat!("../../tools/aws/", $dir, "/go.sum")),
            files: &[],
        }
    };
}

/// cloud-provider-aws's CCM: a release per Kubernetes minor.
pub const CCM: ProviderCcm = ProviderCcm {
    provider: "aws",
    project: "cloud-provider-aws",
    module: "k8s.io/cloud-provider-aws",
    package: "k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager",
    binary: config::pins::AWS_CCM_BINARY,
    pins: &[aws_module!("v1.37"), aws_module!("v1.36")],
    skew: 0,
    // Upstream's Makefile `LDFLAGS`: the version in `--version` and in the metrics.
    version_vars: &["k8s.io/component-base/version.gitVersion={version}", "main.gitVersion={version}"],
};

/// moto and everything it pulls in, pinned.
pub const MOTO_REQUIREMENTS: &str = include_str!("../../tools/aws/moto-requirements.txt");

/// moto's server with the AWS default health check of a new classic ELB (a gap of moto's the CCM
/// cannot do without): run by the virtualenv's python.
const MOTO_SERVER: &str = include_str!("../../tools/aws/moto_server.py");
const MOTO_SERVER_FILE: &str = "moto_server.py";

/// moto's pinned version.
pub fn moto_version() -> &'static str {
    MOTO_REQUIREMENTS
        .lines()
        .find_map(|line| line.trim().strip_prefix("moto[server]=="))
        .expect("tools/aws/moto-requirements.txt pins moto[server]")
}

/// moto's virtualenv, cached under moto's own version (`<cache>/moto/<version>/`).
const MOTO: Virtualenv = Virtualenv {
    name: "moto",
    purpose: "the aws provider's cloud",
    requirements: MOTO_REQUIREMENTS,
    local_packages: &[],
};

fn moto_dir() -> PathBuf {
    cache_root().join("moto").join(moto_version())
}

/// The installed moto server: [`MOTO_SERVER`], an executable whose interpreter is the virtualenv's
/// python (rewritten when this harness carries another version of it).
pub fn installed_moto() -> Result<PathBuf> {
    let bin = MOTO.installed_as(moto_version()).map_err(|_| ToolchainError::ProviderNotInstalled {
        what: format!("moto {} (the aws provider's cloud)", moto_version()),
        hint: "run `harness toolchain install --all`".into(),
    })?;
    let server = moto_dir().join(MOTO_SERVER_FILE);
    let text = moto_server_script(&bin);
    if fs::read_to_string(&server).ok().as_deref() != Some(text.as_str()) {
        fs::write(&server, &text).map_err(io_err("writing", &server))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&server, fs::Permissions::from_mode(0o755))
            .map_err(io_err("making executable", &server))?;
    }
    Ok(server)
}

/// The moto server's script for the virtualenv whose `bin/` is `bin`.
fn moto_server_script(bin: &Path) -> String {
    format!("#!{}\n{MOTO_SERVER}", bin.join("python3").display())
}

/// Builds moto's cache entry in `dir` (a directory named as [`moto_version`]) with `python`, as it
/// will run from `cache` (a cache root elsewhere: the harness's image's), so that
/// [`installed_moto`] there finds it whole and rewrites nothing.
pub fn build_moto_for(dir: &Path, python: &Path, cache: &Path) -> Result<()> {
    MOTO.build(dir, python)?;
    let bin = cache.join("moto").join(moto_version()).join("venv").join("bin");
    let server = dir.join(MOTO_SERVER_FILE);
    fs::write(&server, moto_server_script(&bin)).map_err(io_err("writing", &server))?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&server, fs::Permissions::from_mode(0o755)).map_err(io_err("making executable", &server))
}

/// Installs moto into a virtualenv unless it is there (or `force`); returns `moto_server`.
pub fn install_moto(force: bool) -> Result<PathBuf> {
    MOTO.install_as(moto_version(), force)?;
    installed_moto()
}

#[cfg(test)]
mod tests {
    use super::super::virtualenv::unpinned;
    use super::*;

    #[test]
    fn every_kubernetes_minor_has_a_ccm_release_of_the_same_minor() {
        for release in super::super::releases() {
            let version = CCM.version(&release).unwrap();
            assert!(version.starts_with(&format!("v1.{}.", release.minor())), "{} → {version}", release.version);
            let pin = CCM.pin(&release).unwrap();
            assert!(pin.go_mod.contains(&format!("tool {}", CCM.package)), "{}", pin.dir);
            assert!(pin.go_sum.contains(&format!("{} {version} h1:", CCM.module)), "{}", pin.dir);
            // The module's own replace directive is not ours: cel-go comes from its original path.
            assert!(!pin.go_mod.contains("=>"), "{}", pin.dir);
        }
    }

    #[test]
    fn moto_is_pinned_with_everything_it_pulls_in() {
        assert_eq!(moto_version(), "5.2.5");
        assert_eq!(unpinned(MOTO_REQUIREMENTS), Vec::<&str>::new());
        assert!(MOTO_REQUIREMENTS.lines().any(|l| l.starts_with("Flask==")), "moto's server needs Flask");
    }

    #[test]
    fn the_ccm_is_stamped_like_upstreams_makefile_does() {
        let flags = CCM.ldflags("v1.37.1");
        assert!(flags.contains("-X k8s.io/component-base/version.gitVersion=v1.37.1"), "{flags}");
        assert!(flags.contains("-X main.gitVersion=v1.37.1"), "{flags}");
    }
}
