//! The Go modules under `tools/kube/`, embedded so that the `harness` binary can build the
//! Kubernetes toolchain from any directory. `tools/kube/pin.sh` writes the Kubernetes ones.

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
            go_mod: include_str!(concat!("../../../tools/kube/", $dir, "/go.mod")),
            go_sum: include_str!(concat!("../../../tools/kube/", $dir, "/go.sum")),
            files: &[$(($file, include_str!(concat!("../../../tools/kube/", $dir, "/", $file)))),*],
        }
    };
}

/// Pinned Kubernetes releases, newest first: the first is the default.
pub const KUBERNETES: &[GoModule] = &[module!("v1.37"), module!("v1.36")];

/// etcd, through a wrapper module: etcd's root module has replace directives.
pub const ETCD: GoModule = module!("etcd", "main.go");

/// kwok, the controller that keeps simulated nodes and pods alive.
pub const KWOK: GoModule = module!("kwok");

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
    fn etcd_and_kwok_versions_are_pinned() {
        assert!(required_version(&ETCD, "go.etcd.io/etcd/server/v3").is_some());
        assert!(required_version(&KWOK, "sigs.k8s.io/kwok").is_some());
    }
}
