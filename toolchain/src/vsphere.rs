//! What the `vsphere` provider needs beyond the Kubernetes toolchain, installed by `harness
//! toolchain install --all` and cached under the cache dir:
//!
//! - cloud-provider-vsphere's `vsphere-cloud-controller-manager`, built unmodified from the Go
//!   module proxy at the release pinned in `tools/vsphere/v1.<minor>/` (`tools/vsphere/pin.sh`):
//!   `<cache>/providers/vsphere/<version>/bin/`. Its newest release goes with the next Kubernetes
//!   minor too (a CCM one minor behind its control plane, as the skew policy allows);
//! - govmomi's `vcsim` (the vCenter API simulator) and `govc` (its CLI), unmodified, from the
//!   module pinned in `tools/vsphere/govmomi/`: `<cache>/govmomi/<version>/bin/`. They are at
//!   v0.46.3, the last govmomi release with both in its root module: from v0.47.0 on they are
//!   nested modules without tags, which the Go module proxy does not serve. The CCM's own govmomi
//!   (v0.53.0) talks to it over the vSphere API, which does not depend on the client's version.

use std::fs;
use std::path::PathBuf;

use super::pins::GoModule;
use super::provider_ccm::{CacheEntry, ProviderCcm, build_cached};
use super::{Build, GoCommand, Result, ToolchainError, cache_root};

/// cloud-provider-vsphere's CCM.
pub const CCM: ProviderCcm = ProviderCcm {
    provider: "vsphere",
    project: "cloud-provider-vsphere",
    module: "k8s.io/cloud-provider-vsphere",
    package: "k8s.io/cloud-provider-vsphere/cmd/vsphere-cloud-controller-manager",
    binary: config::pins::VSPHERE_CCM_BINARY,
    pins: &[GoModule {
        dir: "vsphere-v1.36",
        go_mod: include_str!("../../tools/vsphere/v1.36/go.mod"),
        go_sum: include_str!("../../tools/vsphere/v1.36/go.sum"),
        files: &[],
    }],
    // v1.37.0 is not released yet: v1.36.0 runs with Kubernetes 1.37 too.
    skew: 1,
    // Upstream's Makefile stamps `main.version` (its `--version`); component-base's variable is
    // stamped too, under its current path, so the version metric carries it.
    version_vars: &["main.version={version}", "k8s.io/component-base/version.gitVersion={version}"],
};

/// govmomi's vcsim and govc, pinned.
pub const GOVMOMI: GoModule = GoModule {
    dir: "vsphere-govmomi",
    go_mod: include_str!("../../tools/vsphere/govmomi/go.mod"),
    go_sum: include_str!("../../tools/vsphere/govmomi/go.sum"),
    files: &[],
};

/// The installed simulator and CLI.
#[derive(Debug, Clone)]
pub struct Govmomi {
    pub vcsim: PathBuf,
    pub govc: PathBuf,
}

/// The pinned govmomi version.
pub fn govmomi_version() -> &'static str {
    super::pins::required_version(&GOVMOMI, "github.com/vmware/govmomi").expect("tools/vsphere/govmomi pins govmomi")
}

fn govmomi_dir() -> PathBuf {
    cache_root().join("govmomi").join(govmomi_version())
}

/// The installed vcsim and govc.
pub fn installed_govmomi() -> Result<Govmomi> {
    let bin = govmomi_dir().join("bin");
    let tools = Govmomi { vcsim: bin.join("vcsim"), govc: bin.join("govc") };
    let built = |path: &PathBuf| fs::metadata(path).is_ok_and(|m| m.len() > 0);
    if built(&tools.vcsim) && built(&tools.govc) {
        return Ok(tools);
    }
    Err(ToolchainError::ProviderNotInstalled {
        what: format!("vcsim and govc {} (the vsphere provider's cloud)", govmomi_version()),
        hint: "run `harness toolchain install --all`".into(),
    })
}

/// Builds vcsim and govc unless they are cached (or `force`).
pub fn install_govmomi(force: bool) -> Result<Govmomi> {
    let build = Build {
        module: &GOVMOMI,
        command: GoCommand::Build,
        packages: vec!["github.com/vmware/govmomi/vcsim", "github.com/vmware/govmomi/govc"],
        outputs: vec!["vcsim", "govc"],
        stamped: false,
        version_vars: vec![],
        label: format!("govmomi {} (vcsim, govc)", govmomi_version()),
    };
    let into = CacheEntry { dir: govmomi_dir(), force, ldflags: "-s -w".into(), against: None };
    build_cached(&build, &into, installed_govmomi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Release, releases};

    #[test]
    fn every_pinned_kubernetes_minor_runs_a_ccm_release_at_most_one_minor_older() {
        for release in releases() {
            let version = CCM.version(&release).unwrap();
            let ccm_minor: u32 = version.split('.').nth(1).unwrap().parse().unwrap();
            let minor: u32 = release.minor().parse().unwrap();
            assert!(ccm_minor <= minor && minor - ccm_minor <= 1, "{} → {version}", release.version);
            let pin = CCM.pin(&release).unwrap();
            assert!(pin.go_mod.contains(&format!("tool {}", CCM.package)), "{}", pin.dir);
            assert!(pin.go_sum.contains(&format!("{} {version} h1:", CCM.module)), "{}", pin.dir);
            // The module's own replace, without which it does not resolve, is carried over.
            assert!(pin.go_mod.contains("replace github.com/vmware-tanzu/vm-operator/pkg/constants/testlabels =>"));
        }
    }

    #[test]
    fn a_minor_two_ahead_of_every_release_is_refused_naming_the_pin_script() {
        let release = Release { version: "v1.38.0", ..releases()[0] };
        let err = CCM.pin(&release).unwrap_err().to_string();
        assert!(err.contains("tools/vsphere/pin.sh v1.38.N"), "{err}");
    }

    #[test]
    fn vcsim_and_govc_come_from_govmomis_root_module() {
        assert_eq!(govmomi_version(), "v0.46.3");
        assert!(GOVMOMI.go_mod.contains("github.com/vmware/govmomi/vcsim"));
        assert!(GOVMOMI.go_mod.contains("github.com/vmware/govmomi/govc"));
    }

    #[test]
    fn the_ccm_is_stamped_like_upstreams_makefile_does() {
        let flags = CCM.ldflags("v1.36.0");
        assert!(flags.contains("-X main.version=v1.36.0"), "{flags}");
    }
}
