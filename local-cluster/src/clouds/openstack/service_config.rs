//! The services' configuration files: pure functions of where the cloud listens and its secrets.
//! Every service logs to stderr (its log is the cluster's `logs/openstack-<service>.log`), talks
//! to MariaDB as root over loopback, and checks tokens with Keystone as a user of the `service`
//! project that holds the `service` role (Nova sends its own token beside the user's, which
//! Neutron's keystonemiddleware refuses without that role).

use std::fmt::Write as _;
use std::path::Path;

/// Where each part of the cloud listens on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ports {
    pub mariadb: u16,
    pub rabbitmq: u16,
    pub rabbitmq_dist: u16,
    pub epmd: u16,
    pub keystone: u16,
    pub glance: u16,
    pub placement: u16,
    pub nova: u16,
    pub neutron: u16,
    /// Octavia's API (0 in the `cluster.json` of a cluster started before Octavia ran).
    #[serde(default)]
    pub octavia: u16,
}

impl Ports {
    pub const COUNT: usize = 10;

    pub fn from_slice(p: [u16; Self::COUNT]) -> Self {
        let [mariadb, rabbitmq, rabbitmq_dist, epmd, keystone, glance, placement, nova, neutron, octavia] = p;
        Ports { mariadb, rabbitmq, rabbitmq_dist, epmd, keystone, glance, placement, nova, neutron, octavia }
    }

    pub fn keystone_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.keystone)
    }

    fn database(&self, name: &str) -> String {
        format!("mysql+pymysql://root@127.0.0.1:{}/{name}", self.mariadb)
    }

    fn transport_url(&self) -> String {
        format!("rabbit://guest:guest@127.0.0.1:{}/", self.rabbitmq)
    }
}

/// The databases the services keep in MariaDB.
pub const DATABASES: &[&str] =
    &["keystone", "glance", "placement", "nova_api", "nova", "nova_cell0", "neutron", "octavia"];

/// The region of the catalog's endpoints and the CCM's cloud config.
pub const REGION: &str = "RegionOne";
/// The project the services' own users are in.
pub const SERVICE_PROJECT: &str = "service";

/// An OpenStack service: its catalog type, the Keystone user it checks tokens as, and the path
/// of its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry {
    pub service: &'static str,
    pub kind: &'static str,
    pub path: &'static str,
}

pub const CATALOG: [CatalogEntry; 5] = [
    CatalogEntry { service: "glance", kind: "image", path: "" },
    CatalogEntry { service: "placement", kind: "placement", path: "" },
    CatalogEntry { service: "nova", kind: "compute", path: "/v2.1" },
    CatalogEntry { service: "neutron", kind: "network", path: "" },
    CatalogEntry { service: "octavia", kind: "load-balancer", path: "" },
];

impl CatalogEntry {
    pub fn port(&self, ports: &Ports) -> u16 {
        match self.service {
            "glance" => ports.glance,
            "placement" => ports.placement,
            "nova" => ports.nova,
            "neutron" => ports.neutron,
            _ => ports.octavia,
        }
    }

    pub fn url(&self, ports: &Ports) -> String {
        format!("http://127.0.0.1:{}{}", self.port(ports), self.path)
    }
}

/// A Keystone user section (`[keystone_authtoken]`, `[neutron]`, `[placement]`, ...): the
/// service's own user in the `service` project.
fn keystone_user(section: &str, ports: &Ports, user: &str, password: &str) -> String {
    let url = ports.keystone_url();
    format!(
        "[{section}]\nauth_url = {url}\nauth_type = password\nproject_domain_name = Default\n\
         user_domain_name = Default\nproject_name = {SERVICE_PROJECT}\nusername = {user}\npassword = {password}\n\
         region_name = {REGION}\n"
    )
}

fn authtoken(ports: &Ports, user: &str, password: &str) -> String {
    let url = ports.keystone_url();
    let mut text = keystone_user("keystone_authtoken", ports, user, password);
    let _ = writeln!(text, "www_authenticate_uri = {url}");
    text
}

pub fn keystone(ports: &Ports, dir: &Path) -> String {
    format!(
        "[DEFAULT]\n\n[database]\nconnection = {}\n\n[fernet_tokens]\nkey_repository = {}\n\n\
         [credential]\nkey_repository = {}\n\n[token]\nprovider = fernet\n",
        ports.database("keystone"),
        dir.join("fernet-keys").display(),
        dir.join("credential-keys").display(),
    )
}

pub fn glance(ports: &Ports, dir: &Path, password: &str) -> String {
    format!(
        "[DEFAULT]\nenabled_backends = local:file\n\n[database]\nconnection = {db}\n\n\
         [glance_store]\ndefault_backend = local\n\n[local]\nfilesystem_store_datadir = {images}\n\n\
         [os_glance_staging_store]\nfilesystem_store_datadir = {staging}\n\n\
         [os_glance_tasks_store]\nfilesystem_store_datadir = {tasks}\n\n\
         [paste_deploy]\nflavor = keystone\nconfig_file = {paste}\n\n[oslo_concurrency]\nlock_path = {locks}\n\n{auth}",
        db = ports.database("glance"),
        images = dir.join("images").display(),
        staging = dir.join("staging").display(),
        tasks = dir.join("tasks").display(),
        paste = dir.join("glance-api-paste.ini").display(),
        locks = dir.join("locks").display(),
        auth = authtoken(ports, "glance", password),
    )
}

pub fn placement(ports: &Ports, password: &str) -> String {
    format!(
        "[DEFAULT]\n\n[placement_database]\nconnection = {}\n\n[api]\nauth_strategy = keystone\n\n{}",
        ports.database("placement"),
        authtoken(ports, "placement", password),
    )
}

/// nova.conf, shared by every Nova service: the fake hypervisor (`fake.FakeDriver`, in memory),
/// one worker per service, and no VNC console. Periodic tasks start at once, not after a random
/// delay of up to a minute: the scheduler's first one maps the new compute hosts to the cell, and
/// no server can boot before. A compute host adds [`nova_compute`].
pub fn nova(ports: &Ports, dir: &Path, password: &str) -> String {
    format!(
        "[DEFAULT]\ntransport_url = {mq}\ncompute_driver = fake.FakeDriver\nstate_path = {state}\n\
         my_ip = 127.0.0.1\ngraceful_shutdown_timeout = 2\nperiodic_fuzzy_delay = 0\n\n[api]\nauth_strategy = keystone\n\n[api_database]\nconnection = {api_db}\n\n\
         [database]\nconnection = {db}\n\n[wsgi]\napi_paste_config = {paste}\n\n\
         [oslo_concurrency]\nlock_path = {locks}\n\n[conductor]\nworkers = 1\n\n[scheduler]\nworkers = 1\n\
         discover_hosts_in_cells_interval = 2\n\n[compute]\nvif_plugging_timeout = 0\n\
         vif_plugging_is_fatal = false\n\n[glance]\napi_servers = http://127.0.0.1:{glance}\n\n\
         [vnc]\nenabled = false\n\n{auth}\n{placement}\n{neutron}\n{service_user}send_service_user_token = true\n",
        mq = ports.transport_url(),
        state = dir.join("state").display(),
        api_db = ports.database("nova_api"),
        db = ports.database("nova"),
        paste = dir.join("api-paste.ini").display(),
        locks = dir.join("locks").display(),
        glance = ports.glance,
        auth = authtoken(ports, "nova", password),
        placement = keystone_user("placement", ports, "placement", password),
        neutron = keystone_user("neutron", ports, "neutron", password),
        service_user = keystone_user("service_user", ports, "nova", password),
    )
}

/// What a compute host adds to nova.conf: its name and a state dir of its own (Nova keeps a
/// compute node's identity there and refuses to start on another's).
pub fn nova_compute(host: &str, state: &Path) -> String {
    format!("[DEFAULT]\nhost = {host}\nstate_path = {}\n", state.display())
}

/// neutron.conf: ML2 with VXLAN tenant networks bound by the harness's mechanism driver (no
/// agents run), routers, and Nova told of port changes.
pub fn neutron(ports: &Ports, dir: &Path, password: &str) -> String {
    format!(
        "[DEFAULT]\ntransport_url = {mq}\ncore_plugin = ml2\nservice_plugins = router\n\
         auth_strategy = keystone\napi_paste_config = {paste}\nstate_path = {state}\n\
         notify_nova_on_port_status_changes = true\nnotify_nova_on_port_data_changes = true\n\n\
         [database]\nconnection = {db}\n\n[oslo_concurrency]\nlock_path = {locks}\n\n\
         [ml2]\ntype_drivers = flat,vxlan\ntenant_network_types = vxlan\nmechanism_drivers = harness\n\
         extension_drivers = port_security\n\n[ml2_type_vxlan]\nvni_ranges = 1:1000\n\n\
         [ml2_type_flat]\nflat_networks = public\n\n{auth}\n{nova}",
        mq = ports.transport_url(),
        paste = dir.join("api-paste.ini").display(),
        state = dir.join("state").display(),
        db = ports.database("neutron"),
        locks = dir.join("locks").display(),
        auth = authtoken(ports, "neutron", password),
        nova = keystone_user("nova", ports, "nova", password),
    )
}

/// octavia.conf, shared by Octavia's API and its worker: the `amphora` provider with the no-op
/// drivers Octavia's own tests use (no amphora VM is booted, no port is made: every load balancer
/// goes ACTIVE with the VIP the no-op network driver hands out), and the CA the worker signs each
/// amphora's certificate with (`dir/ca.pem`, `dir/ca.key`), which it insists on even for no-op
/// amphorae.
pub fn octavia(ports: &Ports, dir: &Path, password: &str) -> String {
    format!(
        "[DEFAULT]\ntransport_url = {mq}\n\n[api_settings]\nauth_strategy = keystone\n\
         enabled_provider_drivers = amphora:The Octavia Amphora driver.\ndefault_provider_driver = amphora\n\n\
         [database]\nconnection = {db}\n\n[controller_worker]\namphora_driver = amphora_noop_driver\n\
         compute_driver = compute_noop_driver\nnetwork_driver = network_noop_driver\n\
         image_driver = image_noop_driver\nvolume_driver = volume_noop_driver\nloadbalancer_topology = SINGLE\n\
         workers = 1\nclient_ca = {ca}\n\n[certificates]\ncert_manager = noop_cert_manager\n\
         ca_certificate = {ca}\nca_private_key = {key}\n\n[task_flow]\njobboard_enabled = false\n\n\
         [oslo_concurrency]\nlock_path = {locks}\n\n{auth}\n{service_auth}",
        mq = ports.transport_url(),
        db = ports.database("octavia"),
        ca = dir.join("ca.pem").display(),
        key = dir.join("ca.key").display(),
        locks = dir.join("locks").display(),
        auth = authtoken(ports, "octavia", password),
        service_auth = keystone_user("service_auth", ports, "octavia", password),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports() -> Ports {
        Ports::from_slice([3306, 5672, 25672, 4369, 5000, 9292, 8778, 8774, 9696, 9876])
    }

    /// Section → key → value, as oslo.config reads an INI file.
    fn parse(text: &str) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> {
        let mut sections = std::collections::BTreeMap::new();
        let mut current = String::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                current = name.to_owned();
                sections.entry(current.clone()).or_insert_with(std::collections::BTreeMap::new);
                continue;
            }
            let (key, value) = line.split_once(" = ").unwrap_or_else(|| panic!("not a key = value line: {line}"));
            let section = sections.get_mut(&current).unwrap_or_else(|| panic!("{key} before any section"));
            assert!(section.insert(key.to_owned(), value.to_owned()).is_none(), "{key} twice in [{current}]");
        }
        sections
    }

    #[test]
    fn nova_uses_the_fake_hypervisor_and_sends_its_service_token_as_a_service_user() {
        let conf = parse(&nova(&ports(), Path::new("/c/nova"), "pw"));
        assert_eq!(conf["DEFAULT"]["compute_driver"], "fake.FakeDriver");
        assert_eq!(conf["DEFAULT"]["periodic_fuzzy_delay"], "0");
        assert_eq!(conf["DEFAULT"]["transport_url"], "rabbit://guest:guest@127.0.0.1:5672/");
        assert_eq!(conf["api_database"]["connection"], "mysql+pymysql://root@127.0.0.1:3306/nova_api");
        assert_eq!(conf["service_user"]["send_service_user_token"], "true");
        assert_eq!(conf["service_user"]["project_name"], "service");
        assert_eq!(conf["neutron"]["username"], "neutron");
        assert_eq!(conf["glance"]["api_servers"], "http://127.0.0.1:9292");
        assert_eq!(conf["keystone_authtoken"]["www_authenticate_uri"], "http://127.0.0.1:5000");
    }

    #[test]
    fn neutron_binds_ports_with_the_harness_driver_and_every_file_parses() {
        let conf = parse(&neutron(&ports(), Path::new("/c/neutron"), "pw"));
        assert_eq!(conf["ml2"]["mechanism_drivers"], "harness");
        assert_eq!(conf["DEFAULT"]["service_plugins"], "router");
        assert_eq!(conf["database"]["connection"], "mysql+pymysql://root@127.0.0.1:3306/neutron");
        for text in [
            keystone(&ports(), Path::new("/c/keystone")),
            glance(&ports(), Path::new("/c/glance"), "pw"),
            placement(&ports(), "pw"),
            nova_compute("compute-0", Path::new("/c/nova/compute-0")),
        ] {
            parse(&text);
        }
    }

    #[test]
    fn octavia_runs_the_amphora_provider_on_no_op_drivers_with_its_own_ca() {
        let conf = parse(&octavia(&ports(), Path::new("/c/octavia"), "pw"));
        assert_eq!(conf["api_settings"]["default_provider_driver"], "amphora");
        for (key, driver) in [
            ("amphora_driver", "amphora_noop_driver"),
            ("compute_driver", "compute_noop_driver"),
            ("network_driver", "network_noop_driver"),
        ] {
            assert_eq!(conf["controller_worker"][key], driver);
        }
        assert_eq!(conf["controller_worker"]["client_ca"], "/c/octavia/ca.pem");
        assert_eq!(conf["certificates"]["ca_private_key"], "/c/octavia/ca.key");
        assert_eq!(conf["database"]["connection"], "mysql+pymysql://root@127.0.0.1:3306/octavia");
        assert_eq!(conf["service_auth"]["username"], "octavia");
        assert_eq!(conf["keystone_authtoken"]["username"], "octavia");
    }

    #[test]
    fn every_catalog_entry_is_served_on_its_own_port() {
        let ports = ports();
        let urls: Vec<String> = CATALOG.iter().map(|e| e.url(&ports)).collect();
        assert_eq!(
            urls,
            [
                "http://127.0.0.1:9292",
                "http://127.0.0.1:8778",
                "http://127.0.0.1:8774/v2.1",
                "http://127.0.0.1:9696",
                "http://127.0.0.1:9876"
            ]
        );
    }
}
