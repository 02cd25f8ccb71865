//! What the harness pins: the Go modules under `tools/kube/` and `tools/local-upstream-ccm/`,
//! embedded so that the `harness` binary can build the Kubernetes toolchain from any directory
//! (`local-cluster`'s `toolchain` builds them), and the CCMs the toolchain can build.
//! `tools/kube/pin.sh` writes the Kubernetes ones.

/// One Go module the toolchain is built from.
#[derive(Debug, Clone, Copy)]
pub struct GoModule {
    /// Folder name under `tools/kube/`, also the build directory's name in the cache.
    pub dir: &'static str,
    pub go_mod: &'static str,
    pub go_sum: &'static str,
    /// Extra source files the module needs (name, contents).
    pub files: &'static [(&'static str, &'static str)],
}

macro_rules! module {
    ($dir:literal $(, $file:literal)*) => {
        GoModule {
            dir: $dir,
            go_mod: include_str!(concat!("../../tools/kube/", $dir, "/go.mod")),
            go_sum: include_str!(concat!("../../tools/kube/", $dir, "/go.sum")),
            files: &[$(($file, include_str!(concat!("../../tools/kube/", $dir, "/", $file)))),*],
        }
    };
}

/// Pinned Kubernetes releases, newest first: the first is the default. `e2e_imports.go` is never
/// built (build tag `tools`); it keeps `go mod tidy` from dropping what `e2e.test` needs.
pub const KUBERNETES: &[GoModule] = &[module!("v1.37", "e2e_imports.go"), module!("v1.36", "e2e_imports.go")];

/// `local-upstream-ccm` (`tools/local-upstream-ccm/`): upstream's CCM over the local cloud, one
/// module per pinned release (`vMAJOR.MINOR/go.mod` pins k8s.io/cloud-provider at the release's
/// staging version), all built from the same Go source. `tools/local-upstream-ccm/pin.sh` writes them.
macro_rules! upstream_ccm {
    ($minor:literal) => {
        GoModule {
            dir: concat!("local-upstream-ccm/", $minor),
            go_mod: include_str!(concat!("../../tools/local-upstream-ccm/", $minor, "/go.mod")),
            go_sum: include_str!(concat!("../../tools/local-upstream-ccm/", $minor, "/go.sum")),
            files: UPSTREAM_CCM_SOURCE,
        }
    };
}

/// The Go source of `local-upstream-ccm`, shared by every release's module.
pub const UPSTREAM_CCM_SOURCE: &[(&str, &str)] = &[
    ("main.go", include_str!("../../tools/local-upstream-ccm/main.go")),
    ("provider.go", include_str!("../../tools/local-upstream-ccm/provider.go")),
    ("client.go", include_str!("../../tools/local-upstream-ccm/client.go")),
];

/// `local-upstream-ccm` per pinned release, in the order of [`KUBERNETES`].
pub const UPSTREAM_CCM: &[GoModule] = &[upstream_ccm!("v1.37"), upstream_ccm!("v1.36")];

/// The `local-upstream-ccm` module of the Kubernetes pin `kubernetes` (same `vMAJOR.MINOR`).
pub fn upstream_ccm(kubernetes: &GoModule) -> Option<&'static GoModule> {
    UPSTREAM_CCM.iter().find(|module| module.dir.rsplit('/').next() == Some(kubernetes.dir))
}

/// etcd, through a wrapper module: etcd's root module has replace directives.
pub const ETCD: GoModule = module!("etcd", "main.go");

/// kwok, the controller that keeps simulated nodes and pods alive.
pub const KWOK: GoModule = module!("kwok");

/// containerd v2 (`containerd`, `containerd-shim-runc-v2`, `ctr`): the container runtime of real
/// nodes, its `go.mod` naming the three commands as tools.
pub const CONTAINERD: GoModule = module!("containerd");

/// CoreDNS with the plugins a cluster's DNS uses, through a wrapper module (`main.go`): CoreDNS's
/// own main package links every plugin, cloud DNS backends included.
pub const COREDNS: GoModule = module!("coredns", "main.go");

/// `netproxy` (stdlib only): carries traffic between the root network namespace and a cluster's
/// hub namespace through Unix sockets ([`local_cluster::real`]).
pub const NETPROXY: GoModule = module!("netproxy", "main.go");

/// `wget` (stdlib only): the busybox-based images' wget, in place of Debian's busybox 1.35 applet,
/// which crashes on `-T` ([`local_cluster::images`]).
pub const WGET: GoModule = module!("wget", "main.go");

/// `registry` (stdlib only): a read-only OCI registry over the built image archives, real nodes'
/// mirror of registry.k8s.io ([`local_cluster::images`]).
pub const REGISTRY: GoModule = module!("registry", "main.go");

/// The Kubernetes versions pinned, newest first: the first is the default.
pub fn kubernetes_versions() -> Vec<&'static str> {
    KUBERNETES
        .iter()
        .map(|module| required_version(module, "k8s.io/kubernetes").expect("pins require k8s.io/kubernetes"))
        .collect()
}

/// Upstream's cloud-controller-manager (`k8s.io/cloud-provider` of the release) with the local
/// cloud plugged in: `tools/local-upstream-ccm/`, the CCM of the `local-upstream` provider.
pub const UPSTREAM_CCM_BINARY: &str = "local-upstream-ccm";

/// cloud-provider-aws's CCM, built from the Go module proxy at the release pinned for each
/// Kubernetes minor (`tools/aws/`).
pub const AWS_CCM_BINARY: &str = "aws-cloud-controller-manager";

/// cloud-provider-vsphere's CCM, built from the Go module proxy at the release pinned in
/// `tools/vsphere/`.
pub const VSPHERE_CCM_BINARY: &str = "vsphere-cloud-controller-manager";

/// cloud-provider-openstack's CCM, built from the Go module proxy at the release pinned in
/// `tools/openstack/`.
pub const OPENSTACK_CCM_BINARY: &str = "openstack-cloud-controller-manager";

/// The CCMs built with each Kubernetes toolchain (in its bin dir).
pub const TOOLCHAIN_CCMS: &[&str] = &[UPSTREAM_CCM_BINARY];

/// What a provider's `ccm.build` of `kind: toolchain` may name: the toolchain's own CCMs, and the
/// providers' CCMs the toolchain builds from the Go module proxy.
pub const BUILDABLE_CCMS: &[&str] = &[UPSTREAM_CCM_BINARY, AWS_CCM_BINARY, VSPHERE_CCM_BINARY, OPENSTACK_CCM_BINARY];

/// The version a module requires of `path`, read from its go.mod (`require path vX` or `path vX`).
pub fn required_version(module: &GoModule, path: &str) -> Option<&'static str> {
    module.go_mod.lines().find_map(|line| {
        let mut words = line.trim().trim_start_matches("require").split_whitespace();
        (words.next()? == path).then_some(())?;
        words.next().filter(|v| v.starts_with('v'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kubernetes_pin_names_its_release_and_pins_staging_modules_to_it() {
        for pin in KUBERNETES {
            let version = required_version(pin, "k8s.io/kubernetes").expect("require k8s.io/kubernetes");
            let minor = pin.dir.trim_start_matches("v1.");
            assert!(version.starts_with(&format!("v1.{minor}.")), "{} requires {version}", pin.dir);
            let staging = format!("k8s.io/api => k8s.io/api v0.{}", &version[3..]);
            assert!(pin.go_mod.contains(&staging), "{} lacks `{staging}`", pin.dir);
        }
    }

    #[test]
    fn every_kubernetes_pin_has_ginkgo_and_what_e2e_test_imports() {
        for pin in KUBERNETES {
            // `tools/kube/pin.sh` takes ginkgo's version from k8s.io/kubernetes' own go.mod.
            let ginkgo = required_version(pin, "github.com/onsi/ginkgo/v2").expect("require ginkgo");
            assert!(ginkgo.starts_with("v2."), "{} requires ginkgo {ginkgo}", pin.dir);
            let tools = pin.go_mod.split("tool (").nth(1).and_then(|rest| rest.split(')').next()).unwrap_or_default();
            assert!(tools.lines().any(|l| l.trim() == "github.com/onsi/ginkgo/v2/ginkgo"), "{}: {tools}", pin.dir);
            assert!(pin.go_sum.contains(&format!("github.com/onsi/ginkgo/v2 {ginkgo} h1:")), "{}", pin.dir);

            let (_, imports) = pin.files.iter().find(|(name, _)| *name == "e2e_imports.go").expect("e2e_imports.go");
            assert!(imports.contains("//go:build tools"), "{}: e2e_imports.go must never be built", pin.dir);
            for package in ["k8s.io/kubernetes/test/e2e", "k8s.io/kubernetes/test/e2e/framework"] {
                assert!(imports.contains(&format!("_ \"{package}\"")), "{} lacks {package}", pin.dir);
            }
        }
    }

    #[test]
    fn every_required_module_is_in_go_sum() {
        // What `go test -c` and `go build` need under -mod=readonly (GOFLAGS unset): go.sum holds
        // the go.mod hash of every module go.mod requires (replaced ones under their replacement).
        for pin in KUBERNETES.iter().chain(UPSTREAM_CCM).chain([
            &ETCD,
            &KWOK,
            &CONTAINERD,
            &COREDNS,
            &NETPROXY,
            &WGET,
            &REGISTRY,
        ]) {
            let replaced: std::collections::BTreeMap<&str, &str> = pin
                .go_mod
                .lines()
                .filter_map(|l| l.split_once(" => "))
                .filter_map(|(from, to)| Some((from.split_whitespace().next()?, to.split_whitespace().nth(1)?)))
                .collect();
            let mut in_require = false;
            for line in pin.go_mod.lines().map(str::trim) {
                match line {
                    "require (" => in_require = true,
                    ")" => in_require = false,
                    _ => {}
                }
                let words: Vec<&str> = line.trim_start_matches("require ").split_whitespace().collect();
                let is_require = in_require || line.starts_with("require ");
                if !is_require || words.len() < 2 || !words[1].starts_with('v') {
                    continue;
                }
                let version = replaced.get(words[0]).copied().unwrap_or(words[1]);
                let entry = format!("{} {version}/go.mod h1:", words[0]);
                assert!(pin.go_sum.contains(&entry), "{}/go.sum lacks `{entry}`", pin.dir);
            }
        }
    }

    #[test]
    fn every_kubernetes_pin_has_an_upstream_ccm_on_its_own_cloud_provider_version() {
        assert_eq!(UPSTREAM_CCM.len(), KUBERNETES.len());
        for pin in KUBERNETES {
            let ccm = upstream_ccm(pin).unwrap_or_else(|| panic!("no local-upstream-ccm module for {}", pin.dir));
            let kubernetes = required_version(pin, "k8s.io/kubernetes").unwrap();
            let staging = format!("v0.{}", &kubernetes[3..]);
            for module in ["k8s.io/cloud-provider", "k8s.io/component-base", "k8s.io/api", "k8s.io/apimachinery"] {
                assert_eq!(required_version(ccm, module), Some(staging.as_str()), "{}: {module}", ccm.dir);
            }
            for (name, source) in ccm.files {
                assert!(source.starts_with("package main") || source.contains("\npackage main\n"), "{name}");
            }
            assert!(ccm.go_mod.contains("module cloud-provider-harness/tools/local-upstream-ccm\n"), "{}", ccm.dir);
        }
    }

    #[test]
    fn etcd_and_kwok_versions_are_pinned() {
        assert!(required_version(&ETCD, "go.etcd.io/etcd/server/v3").is_some());
        assert!(required_version(&KWOK, "sigs.k8s.io/kwok").is_some());
        assert!(
            required_version(&CONTAINERD, "github.com/containerd/containerd/v2").is_some_and(|v| v.starts_with("v2."))
        );
        assert!(required_version(&COREDNS, "github.com/coredns/coredns").is_some());
    }
}
