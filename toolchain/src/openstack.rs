//! What the `openstack` provider runs, installed by `harness toolchain install --all`:
//!
//! - cloud-provider-openstack's `openstack-cloud-controller-manager`, built unmodified from the Go
//!   module proxy at the release pinned in `tools/openstack/v1.<minor>/` (`tools/openstack/pin.sh`):
//!   `<cache>/providers/openstack/<version>/bin/`;
//! - the OpenStack services from PyPI (Keystone, Glance, Placement, Nova, Neutron, Octavia) and
//!   python-openstackclient, every package pinned in `tools/openstack/requirements.txt`, in one
//!   virtualenv: `<cache>/openstack/<hash of the pins>/venv/`, with the harness's ML2 mechanism
//!   driver (`tools/openstack/harness-ml2`: Neutron runs no agents);
//! - from Debian's packages (`scripts/common.sh` installs them): MariaDB, the database every
//!   service uses (Neutron's and Octavia's migrations need MySQL), and RabbitMQ with Erlang's
//!   epmd, the message bus between Nova's services.

use std::path::PathBuf;

use super::pins::GoModule;
use super::provider_ccm::ProviderCcm;
use super::virtualenv::{LocalPackage, Virtualenv};
use super::{Result, ToolchainError, search_path};

/// cloud-provider-openstack's CCM.
pub const CCM: ProviderCcm = ProviderCcm {
    provider: "openstack",
    project: "cloud-provider-openstack",
    module: "k8s.io/cloud-provider-openstack",
    package: "k8s.io/cloud-provider-openstack/cmd/openstack-cloud-controller-manager",
    binary: config::pins::OPENSTACK_CCM_BINARY,
    pins: &[GoModule {
        dir: "openstack-v1.36",
        go_mod: include_str!("../../tools/openstack/v1.36/go.mod"),
        go_sum: include_str!("../../tools/openstack/v1.36/go.sum"),
        files: &[],
    }],
    // No v1.37 release yet: v1.36.0 runs with Kubernetes 1.37 too, one minor behind.
    skew: 1,
    // Upstream's Makefile `LDFLAGS`: its own version package and component-base's.
    version_vars: &[
        "k8s.io/cloud-provider-openstack/pkg/version.Version={version}",
        "k8s.io/component-base/version.gitVersion={version}",
    ],
};

/// The services and everything they pull in, pinned.
pub const REQUIREMENTS: &str = include_str!("../../tools/openstack/requirements.txt");

/// The WSGI entry point every API service runs under gunicorn ([`Programs::wsgi_app`]).
pub const WSGI_APP: &str = include_str!("../../tools/openstack/wsgi_app.py");

const ML2_DRIVER: LocalPackage = LocalPackage {
    dir: "harness-ml2",
    files: &[
        ("pyproject.toml", include_str!("../../tools/openstack/harness-ml2/pyproject.toml")),
        ("harness_ml2/__init__.py", include_str!("../../tools/openstack/harness-ml2/harness_ml2/__init__.py")),
    ],
};

/// The services' virtualenv.
pub const SERVICES: Virtualenv = Virtualenv {
    name: "openstack",
    purpose: "the openstack provider's cloud",
    requirements: REQUIREMENTS,
    local_packages: &[ML2_DRIVER],
};

/// The version `tools/openstack/requirements.txt` pins `package` at.
pub fn pinned_version(package: &str) -> Option<&'static str> {
    REQUIREMENTS.lines().find_map(|line| {
        let (name, version) = line.trim().split_once("==")?;
        name.eq_ignore_ascii_case(package).then_some(version)
    })
}

/// What the cloud runs: the virtualenv's programs and Debian's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Programs {
    /// The virtualenv's `bin/`: `gunicorn`, `keystone-manage`, `nova-compute`, ...
    pub venv_bin: PathBuf,
    pub mariadbd: PathBuf,
    pub mariadb_install_db: PathBuf,
    /// RabbitMQ's own start script (Debian's `/usr/sbin/rabbitmq-server` wraps it to run as the
    /// `rabbitmq` user, which a cluster's private broker is not).
    pub rabbitmq_server: PathBuf,
    pub epmd: PathBuf,
}

impl Programs {
    /// A program of the virtualenv.
    pub fn venv(&self, program: &str) -> PathBuf {
        self.venv_bin.join(program)
    }
}

/// The Debian packages Debian's servers come from: the harness runs them but does not install them.
pub const DEBIAN_PACKAGES: &[&str] = &["mariadb-server", "rabbitmq-server"];

/// Debian's servers the cloud runs: `mariadbd`, `mariadb-install-db`, RabbitMQ's own start script
/// and `epmd`, in that order; or which packages to install.
pub fn servers() -> Result<[PathBuf; 4]> {
    let debian = |name: &str, places: &[&str]| -> Result<PathBuf> {
        places.iter().map(PathBuf::from).chain(search_path(name)).find(|p| p.is_file()).ok_or_else(|| {
            let packages = DEBIAN_PACKAGES.join(" ");
            ToolchainError::ProviderNotInstalled {
                what: format!("{name} (the openstack provider's cloud needs it)"),
                hint: format!("install Debian's {packages} (apt-get install {packages}; scripts/test does)"),
            }
        })
    };
    Ok([
        debian("mariadbd", &["/usr/sbin/mariadbd"])?,
        debian("mariadb-install-db", &["/usr/bin/mariadb-install-db"])?,
        debian("rabbitmq-server", &["/usr/lib/rabbitmq/bin/rabbitmq-server"])?,
        debian("epmd", &["/usr/bin/epmd"])?,
    ])
}

/// The installed programs, or what is missing and how to install it.
pub fn installed() -> Result<Programs> {
    let [mariadbd, mariadb_install_db, rabbitmq_server, epmd] = servers()?;
    let venv_bin = SERVICES.installed()?;
    Ok(Programs { venv_bin, mariadbd, mariadb_install_db, rabbitmq_server, epmd })
}

/// Installs the virtualenv unless it is there (or `force`); returns every program.
pub fn install(force: bool) -> Result<Programs> {
    SERVICES.install(force)?;
    installed()
}

#[cfg(test)]
mod tests {
    use super::super::virtualenv::unpinned;
    use super::*;

    #[test]
    fn both_kubernetes_minors_get_the_v1_36_release_unmodified_and_stamped() {
        for release in super::super::releases() {
            assert_eq!(CCM.version(&release).unwrap(), "v1.36.0", "{}", release.version);
        }
        let pin = CCM.pins[0];
        assert!(pin.go_mod.contains(&format!("tool {}", CCM.package)), "{}", pin.go_mod);
        let flags = CCM.ldflags("v1.36.0");
        assert!(flags.contains("-X k8s.io/cloud-provider-openstack/pkg/version.Version=v1.36.0"), "{flags}");
    }

    #[test]
    fn every_service_is_pinned_with_everything_it_pulls_in() {
        assert_eq!(unpinned(REQUIREMENTS), Vec::<&str>::new());
        for (package, version) in [
            ("keystone", "30.0.0"),
            ("glance", "33.0.0"),
            ("openstack-placement", "16.0.0"),
            ("nova", "34.0.0"),
            ("neutron", "29.0.0"),
            ("octavia", "19.0.0"),
        ] {
            assert_eq!(pinned_version(package), Some(version), "{package}");
        }
        for needed in ["gunicorn", "PyMySQL", "python-openstackclient"] {
            assert!(pinned_version(needed).is_some(), "{needed} is not pinned");
        }
    }

    #[test]
    fn the_ml2_driver_is_registered_under_the_name_neutron_is_configured_with() {
        let (_, pyproject) = ML2_DRIVER.files[0];
        assert!(pyproject.contains("[project.entry-points.\"neutron.ml2.mechanism_drivers\"]"));
        assert!(pyproject.contains("harness = \"harness_ml2:BindEveryPort\""));
        assert!(ML2_DRIVER.files[1].1.contains("class BindEveryPort"));
    }
}
