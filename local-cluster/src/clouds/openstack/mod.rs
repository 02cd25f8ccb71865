//! `--cloud openstack`: the cloud of the `openstack` provider, made of OpenStack's own services
//! from PyPI (installed by `harness toolchain install --all`) with the fake back ends their test
//! suites use, running as processes of the cluster on loopback:
//!
//! - MariaDB (every service's database) and RabbitMQ with an epmd of its own (Nova's bus);
//! - Keystone, Glance (images in files), Placement, Nova's API and Neutron's API under gunicorn;
//! - Nova's conductor and scheduler, and a compute host per zone with the fake hypervisor
//!   (`fake.FakeDriver`: servers live in its memory); Neutron's ports are bound by the harness's
//!   ML2 driver (`tools/openstack/harness-ml2`), since no agent runs;
//! - Octavia's API and worker, with the `amphora` provider on the no-op drivers of Octavia's own
//!   tests: load balancers, listeners, pools and members are real API objects that go ACTIVE, but
//!   no amphora runs, so no traffic flows through them.
//!
//! The harness then gives it what an OpenStack project for a cluster has: a project and user of
//! the cluster's (the CCM's credentials), a flavor and an image, a network with a subnet holding
//! the nodes' addresses and a router on it, a zone per compute host (a host aggregate), and one
//! server per node, named after it, on a port whose fixed IP is the node's address. The
//! cloud-provider-openstack CCM finds each node's server by that name.

pub mod api;
pub mod load_balancers;
pub mod preflight;
mod provision;
pub mod servers;
pub mod service_config;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{
    Cloud, CloudError, CloudErrorKind, CloudFacts, CloudKind, CloudSettings, CloudState, InstanceState, LoadBalancers,
    Machines, Routes,
};
use crate::machines::MachineAction;
use crate::{ClusterError, LocalCluster, Result, io_err, process};
pub use service_config::{Ports, REGION};
use toolchain::openstack::{Programs, WSGI_APP};

/// The compute hosts, one per zone; a cluster of fewer nodes runs as many as it has nodes.
pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
/// Every node's server has this flavor: the instance type the CCM reports.
pub const FLAVOR: &str = "m1.medium";
pub const IMAGE: &str = "harness-node";
/// The cluster's project and the user the CCM logs in as.
pub const PROJECT: &str = "harness";
pub const USERNAME: &str = "harness";
pub const NETWORK: &str = "nodes";
/// The CCM's `--cloud-config` (INI), in the cluster dir.
pub const CLOUD_CONFIG: &str = "openstack-cloud.conf";

fn facts() -> &'static CloudFacts {
    config::clouds::named("openstack").expect("config::clouds lists openstack")
}

pub(crate) fn error(kind: CloudErrorKind, what: impl Into<String>, message: impl std::fmt::Display) -> ClusterError {
    CloudError::new(facts(), kind, what, message).into()
}

/// OpenStack in the registry.
pub struct Openstack;

impl CloudKind for Openstack {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    fn install(&self, force: bool) -> Result<Vec<String>> {
        let programs = toolchain::openstack::install(force)?;
        let nova = toolchain::openstack::pinned_version("nova").unwrap_or("?");
        Ok(vec![format!("OpenStack services (nova {nova}): {}", programs.venv_bin.display())])
    }

    fn provider_ccm(&self) -> Option<&'static toolchain::provider_ccm::ProviderCcm> {
        Some(&toolchain::openstack::CCM)
    }

    fn debian_packages(&self) -> &'static [&'static str] {
        toolchain::openstack::DEBIAN_PACKAGES
    }

    fn check_host(&self) -> Result<()> {
        Ok(toolchain::openstack::servers().map(drop)?)
    }

    fn prepare(&self, _settings: &CloudSettings) -> Result<Arc<dyn Cloud>> {
        Ok(Arc::new(OpenstackSetup { programs: toolchain::openstack::install(false)? }))
    }
}

/// How the harness starts the cloud.
#[derive(Debug, Clone)]
pub struct OpenstackSetup {
    pub programs: Programs,
}

/// What `cluster.json` records of the cluster's OpenStack.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OpenstackState {
    pub ports: Ports,
    /// Keystone's v3 URL.
    pub auth_url: String,
    pub region: String,
    pub admin_password: String,
    /// The CCM's credentials: user [`USERNAME`] in project [`PROJECT`].
    pub password: String,
    pub project_id: String,
    pub network_id: String,
    pub subnet_id: String,
    pub router_id: String,
    /// Node name → its server's id.
    pub servers: BTreeMap<String, String>,
    /// Node name → its server's availability zone.
    pub zones: BTreeMap<String, String>,
}

impl OpenstackState {
    /// The credentials of the cluster's user, or of the cloud's admin.
    pub fn credentials(&self, admin: bool) -> api::Credentials {
        let (username, password, project) = match admin {
            true => ("admin", &self.admin_password, "admin"),
            false => (USERNAME, &self.password, PROJECT),
        };
        api::Credentials {
            auth_url: self.auth_url.clone(),
            username: username.into(),
            password: password.clone(),
            project: project.into(),
        }
    }

    /// The server of node `node`.
    pub fn server(&self, node: &str) -> Result<&str> {
        self.servers.get(node).map(String::as_str).ok_or_else(|| {
            let known: Vec<&str> = self.servers.keys().map(String::as_str).collect();
            let what = format!("no server of node {node} in Nova; the nodes are: {}", known.join(", "));
            error(CloudErrorKind::NotFound, what, "")
        })
    }
}

#[async_trait]
impl Cloud for OpenstackSetup {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    /// Starts the services as the cluster's processes `openstack-*`, provisions a server per
    /// machine, and writes the CCM's `--cloud-config`.
    async fn start(
        &self,
        cluster: &mut LocalCluster,
        machines: &Machines,
        _client: &kube::Client,
    ) -> Result<Arc<dyn CloudState>> {
        let nodes = &machines.list;
        let step = cli_support::progress::step(format!(
            "starting OpenStack (the openstack cloud) with {} servers",
            nodes.len()
        ));
        let started = Instant::now();
        let cloud = Services {
            dir: cluster.dir.join("openstack"),
            ports: Ports::from_slice(crate::free_ports()?),
            programs: self.programs.clone(),
        };
        let admin_password = crate::new_password();
        let service_password = crate::new_password();
        let phase = |what: &str| tracing::info!("OpenStack: {what} at {:.1?}", started.elapsed());
        cloud.start_backends(cluster).await?;
        phase("MariaDB and RabbitMQ up");
        let setup = (cloud.clone(), cluster.dir.join("logs"), admin_password.clone(), service_password.clone());
        super::blocking(facts(), "setting up the databases", move || {
            setup.0.set_up_databases(&setup.1, &setup.2, &setup.3)
        })
        .await?;
        phase("schemas synced, Keystone bootstrapped");
        let hosts = ZONES.len().min(nodes.len().max(1));
        cloud.start_apis(cluster)?;
        let admin = cloud.admin_credentials(&admin_password);
        let session = provision::wait_for_keystone(&admin, || crate::check_alive(&cluster.state)).await?;
        phase("Keystone answers");
        provision::register_services(&session, &cloud.ports, &service_password).await?;
        phase("catalog registered");
        cloud.start_nova_services(cluster, hosts)?;
        let session = api::Session::login(&admin).await.map_err(cloud_err)?;
        provision::wait_for_apis(&session, hosts, || crate::check_alive(&cluster.state)).await?;
        phase(&format!("every API answers, {hosts} compute hosts up"));
        let state = provision::provision(&session, &cloud, admin_password, nodes, hosts).await?;
        write_cloud_config(&cluster.dir.join(CLOUD_CONFIG), &state)?;
        tracing::info!("OpenStack up in {:.1?}", started.elapsed());
        step.done();
        Ok(Arc::new(state))
    }
}

#[typetag::serde(name = "openstack")]
#[async_trait]
impl CloudState for OpenstackState {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    fn cloud_config_file(&self) -> &'static str {
        CLOUD_CONFIG
    }

    /// cloud-provider-openstack reads its config over `OS_*` variables: none of the user's.
    fn ccm_environment(&self) -> process::Environment {
        process::Environment { set: vec![], removed: inherited_os_variables() }
    }

    async fn check_ccm_args(&self, args: &[String]) -> Result<()> {
        match crate::cloud_config_arg(args) {
            Some(config) => preflight::check_cloud_config(Path::new(config)).await,
            None => Ok(()),
        }
    }

    async fn act(&self, node: &str, action: MachineAction) -> Result<InstanceState> {
        let server_action = match action {
            MachineAction::Shutdown => servers::ServerAction::Stop,
            MachineAction::Start => servers::ServerAction::Start,
            MachineAction::Terminate => servers::ServerAction::Delete,
        };
        let now = servers::act(self, node, server_action).await?;
        Ok(InstanceState { id: self.server(node)?.to_owned(), state: now })
    }

    fn load_balancers(&self) -> Option<&dyn LoadBalancers> {
        Some(self)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }
}

#[async_trait]
impl LoadBalancers for OpenstackState {
    async fn list_load_balancers(&self) -> Result<Vec<serde_json::Value>> {
        load_balancers::list(self).await
    }
}

#[async_trait]
impl Routes for OpenstackState {
    async fn list_routes(&self, _cluster: &str) -> Result<Vec<serde_json::Value>> {
        servers::router_routes(self).await
    }
}

/// An OpenStack API's error, by what its status says.
fn cloud_err(e: api::ApiError) -> ClusterError {
    let kind = match e.status.map(|s| s.as_u16()) {
        None => CloudErrorKind::Unreachable,
        Some(404) => CloudErrorKind::NotFound,
        Some(_) => CloudErrorKind::Refused,
    };
    error(kind, e.what, e.detail)
}

/// The cloud being started: where its files go, where it listens, what it runs.
#[derive(Clone)]
pub(crate) struct Services {
    dir: PathBuf,
    ports: Ports,
    programs: Programs,
}

impl Services {
    fn admin_credentials(&self, password: &str) -> api::Credentials {
        api::Credentials {
            auth_url: format!("{}/v3", self.ports.keystone_url()),
            username: "admin".into(),
            password: password.into(),
            project: "admin".into(),
        }
    }

    fn service_dir(&self, service: &str) -> Result<PathBuf> {
        let dir = self.dir.join(service);
        std::fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
        Ok(dir)
    }

    /// Starts a service as one of the cluster's processes; the cloud's services stop together.
    fn start(&self, cluster: &mut LocalCluster, binary: &Path, component: &str, args: Vec<String>) -> Result<()> {
        self.start_with_env(cluster, binary, component, args, &process::Environment::default())
    }

    fn start_with_env(
        &self,
        cluster: &mut LocalCluster,
        binary: &Path,
        component: &str,
        args: Vec<String>,
        env: &process::Environment,
    ) -> Result<()> {
        cluster.start_in_batch(binary, component, args, env, Some(facts().name))
    }

    fn write(&self, path: &Path, text: &str) -> Result<()> {
        std::fs::write(path, text).map_err(io_err("writing", path))
    }

    /// MariaDB (with every service's database), and RabbitMQ with its own epmd.
    async fn start_backends(&self, cluster: &mut LocalCluster) -> Result<()> {
        let mariadb = self.service_dir("mariadb")?;
        let data = mariadb.join("data");
        let log = cluster.dir.join("logs").join("openstack-setup.log");
        let mut install = Command::new(&self.programs.mariadb_install_db);
        install.arg(format!("--datadir={}", data.display())).args([
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]);
        run_setup(install, &log, "creating MariaDB's data dir (mariadb-install-db)")?;
        let init = mariadb.join("init.sql");
        let databases: String =
            service_config::DATABASES.iter().map(|db| format!("CREATE DATABASE IF NOT EXISTS {db};\n")).collect();
        self.write(&init, &databases)?;
        let args = vec![
            "--no-defaults".into(),
            format!("--datadir={}", data.display()),
            format!("--socket={}", mariadb.join("mysqld.sock").display()),
            format!("--pid-file={}", mariadb.join("mariadbd.pid").display()),
            format!("--port={}", self.ports.mariadb),
            "--bind-address=127.0.0.1".into(),
            "--user=root".into(),
            "--skip-log-bin".into(),
            "--innodb-buffer-pool-size=64M".into(),
            "--max-connections=1000".into(),
            format!("--init-file={}", init.display()),
        ];
        self.start(cluster, &self.programs.mariadbd, "openstack-mariadb", args)?;

        let rabbit = self.service_dir("rabbitmq")?;
        let epmd_args = vec!["-port".into(), self.ports.epmd.to_string(), "-address".into(), "127.0.0.1".into()];
        self.start(cluster, &self.programs.epmd, "openstack-epmd", epmd_args)?;
        // Erlang starts an epmd daemon of its own (outside the cluster's processes) when none
        // answers on its port: RabbitMQ starts once the cluster's does, and is told not to.
        wait_listening(cluster, "epmd", self.ports.epmd).await?;
        let env = process::Environment { set: rabbitmq_env(&rabbit, &self.ports), removed: vec![] };
        self.start_with_env(cluster, &self.programs.rabbitmq_server, "openstack-rabbitmq", vec![], &env)?;
        for (what, port) in [("MariaDB", self.ports.mariadb), ("RabbitMQ", self.ports.rabbitmq)] {
            wait_listening(cluster, what, port).await?;
        }
        Ok(())
    }

    /// Each service's configuration and database schema; Keystone's keys, admin and catalog entry.
    /// The four services' steps run at once, each service's in order.
    fn set_up_databases(&self, logs_dir: &Path, admin_password: &str, service_password: &str) -> Result<()> {
        let keystone = self.service_dir("keystone")?;
        let keystone_conf = keystone.join("keystone.conf");
        self.write(&keystone_conf, &service_config::keystone(&self.ports, &keystone))?;
        let manage = |program: &str, conf: &Path, args: &[&str]| {
            let mut command = Command::new(self.programs.venv(program));
            command.arg("--config-file").arg(conf).args(args);
            command
        };
        let url = format!("{}/v3", self.ports.keystone_url());
        let mut keystone_steps = vec![
            ("Keystone's schema", manage("keystone-manage", &keystone_conf, &["db_sync"])),
            (
                "Keystone's token keys",
                manage(
                    "keystone-manage",
                    &keystone_conf,
                    &["fernet_setup", "--keystone-user", "root", "--keystone-group", "root"],
                ),
            ),
            (
                "Keystone's credential keys",
                manage(
                    "keystone-manage",
                    &keystone_conf,
                    &["credential_setup", "--keystone-user", "root", "--keystone-group", "root"],
                ),
            ),
        ];
        let mut bootstrap = manage("keystone-manage", &keystone_conf, &["bootstrap"]);
        bootstrap.args(["--bootstrap-password", admin_password, "--bootstrap-region-id", REGION]);
        for interface in ["admin", "internal", "public"] {
            bootstrap.arg(format!("--bootstrap-{interface}-url")).arg(&url);
        }
        keystone_steps.push(("Keystone's admin and catalog", bootstrap));
        let glance = self.service_dir("glance")?;
        let placement = self.service_dir("placement")?;
        let nova = self.service_dir("nova")?;
        let neutron = self.service_dir("neutron")?;
        self.write_service_configs(service_password, &glance, &placement, &nova, &neutron)?;
        let octavia = self.write_octavia_config(service_password)?;
        let nova_conf = nova.join("nova.conf");
        let chains: Vec<Vec<(&str, Command)>> = vec![
            keystone_steps,
            vec![
                ("Glance's schema", manage("glance-manage", &glance.join("glance-api.conf"), &["db_sync"])),
                ("Placement's schema", manage("placement-manage", &placement.join("placement.conf"), &["db", "sync"])),
            ],
            vec![
                ("Nova's API schema", manage("nova-manage", &nova_conf, &["api_db", "sync"])),
                ("Nova's cell0", manage("nova-manage", &nova_conf, &["cell_v2", "map_cell0"])),
                ("Nova's cell1", manage("nova-manage", &nova_conf, &["cell_v2", "create_cell", "--name", "cell1"])),
                ("Nova's schema", manage("nova-manage", &nova_conf, &["db", "sync"])),
            ],
            vec![
                ("Neutron's schema", manage("neutron-db-manage", &neutron.join("neutron.conf"), &["upgrade", "heads"])),
                ("Octavia's schema", manage("octavia-db-manage", &octavia, &["upgrade", "head"])),
            ],
        ];
        // The chains are independent: run at once, each its steps in order.
        let results = std::thread::scope(|scope| {
            let handles: Vec<_> = chains
                .into_iter()
                .enumerate()
                .map(|(i, chain)| {
                    let log = logs_dir.join(format!("openstack-setup-{i}.log"));
                    scope
                        .spawn(move || chain.into_iter().try_for_each(|(what, command)| run_setup(command, &log, what)))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a setup step does not panic")).collect::<Vec<_>>()
        });
        results.into_iter().collect()
    }

    /// Writes glance-api.conf, placement.conf, nova.conf and neutron.conf (with the services'
    /// password) and the paste files the WSGI applications read.
    fn write_service_configs(
        &self,
        password: &str,
        glance: &Path,
        placement: &Path,
        nova: &Path,
        neutron: &Path,
    ) -> Result<()> {
        let etc = self.programs.venv_bin.parent().expect("the virtualenv's bin has a parent").join("etc");
        for (from, to) in [
            (etc.join("glance").join("glance-api-paste.ini"), glance.join("glance-api-paste.ini")),
            (etc.join("nova").join("api-paste.ini"), nova.join("api-paste.ini")),
            (etc.join("neutron").join("api-paste.ini"), neutron.join("api-paste.ini")),
        ] {
            std::fs::copy(&from, &to).map_err(io_err("copying the paste file", &from))?;
        }
        self.write(&glance.join("glance-api.conf"), &service_config::glance(&self.ports, glance, password))?;
        self.write(&placement.join("placement.conf"), &service_config::placement(&self.ports, password))?;
        self.write(&nova.join("nova.conf"), &service_config::nova(&self.ports, nova, password))?;
        self.write(&neutron.join("neutron.conf"), &service_config::neutron(&self.ports, neutron, password))?;
        Ok(())
    }

    /// Octavia's CA (which it signs each amphora's certificate with) and octavia.conf; returns
    /// the latter's path.
    fn write_octavia_config(&self, password: &str) -> Result<PathBuf> {
        let dir = self.service_dir("octavia")?;
        crate::pki::write_ca("octavia-amphorae", &dir.join("ca.pem"), &dir.join("ca.key"))?;
        let conf = dir.join("octavia.conf");
        self.write(&conf, &service_config::octavia(&self.ports, &dir, password))?;
        Ok(conf)
    }

    /// Keystone, Glance, Placement, Nova's, Neutron's and Octavia's APIs, each a gunicorn of one
    /// worker, and Octavia's worker (which takes the API's requests from RabbitMQ).
    fn start_apis(&self, cluster: &mut LocalCluster) -> Result<()> {
        let [glance, placement, nova, neutron, octavia] =
            ["glance", "placement", "nova", "neutron", "octavia"].map(|s| self.dir.join(s));
        let wsgi = self.dir.join("wsgi_app.py");
        self.write(&wsgi, WSGI_APP)?;
        let keystone_conf = self.dir.join("keystone").join("keystone.conf");
        let octavia_conf = octavia.join("octavia.conf");
        let shown = |path: &Path| path.display().to_string();
        // Octavia reads no variable: its configuration comes as arguments (see `wsgi_app.py`),
        // quoted as a shell would for `shlex.split`.
        let octavia_args = format!("--config-file '{}'", shown(&octavia_conf).replace('\'', r"'\''"));
        let apis = [
            ("keystone", self.ports.keystone, "keystone.wsgi.api", ("OS_KEYSTONE_CONFIG_FILES", shown(&keystone_conf))),
            ("glance", self.ports.glance, "glance.wsgi.api", ("OS_GLANCE_CONFIG_DIR", shown(&glance))),
            ("placement", self.ports.placement, "placement.wsgi.api", ("OS_PLACEMENT_CONFIG_DIR", shown(&placement))),
            ("nova-api", self.ports.nova, "nova.wsgi.osapi_compute", ("OS_NOVA_CONFIG_DIR", shown(&nova))),
            (
                "neutron",
                self.ports.neutron,
                "neutron.wsgi.api",
                ("OS_NEUTRON_CONFIG_FILES", shown(&neutron.join("neutron.conf"))),
            ),
            ("octavia-api", self.ports.octavia, "octavia.wsgi.api", ("HARNESS_WSGI_ARGS", octavia_args)),
        ];
        for (name, port, module, variable) in apis {
            let args = gunicorn_args(&self.dir, port, module, variable);
            self.start(cluster, &self.programs.venv("gunicorn"), &format!("openstack-{name}"), args)?;
        }
        let args = vec!["--config-file".into(), shown(&octavia_conf)];
        self.start(cluster, &self.programs.venv("octavia-worker"), "openstack-octavia-worker", args)
    }

    /// Nova's conductor and scheduler, and `hosts` compute hosts (one per zone).
    fn start_nova_services(&self, cluster: &mut LocalCluster, hosts: usize) -> Result<()> {
        let nova = self.dir.join("nova");
        let conf = nova.join("nova.conf");
        for service in ["conductor", "scheduler"] {
            let args = vec!["--config-file".into(), conf.display().to_string()];
            self.start(
                cluster,
                &self.programs.venv(&format!("nova-{service}")),
                &format!("openstack-nova-{service}"),
                args,
            )?;
        }
        for host in compute_hosts(hosts) {
            let state = nova.join(&host);
            std::fs::create_dir_all(&state).map_err(io_err("creating", &state))?;
            let host_conf = nova.join(format!("{host}.conf"));
            self.write(&host_conf, &service_config::nova_compute(&host, &state))?;
            let args =
                ["--config-file", &conf.display().to_string(), "--config-file", &host_conf.display().to_string()]
                    .map(String::from)
                    .to_vec();
            self.start(cluster, &self.programs.venv("nova-compute"), &format!("openstack-nova-compute-{host}"), args)?;
        }
        Ok(())
    }
}

/// The compute hosts' names: `compute-<zone>` for each of the first `count` zones.
pub fn compute_hosts(count: usize) -> Vec<String> {
    ZONES.iter().take(count).map(|zone| format!("compute-{}", zone.trim_start_matches("zone-"))).collect()
}

/// gunicorn serving `module`'s WSGI application through the harness's wrapper (`wsgi_app.py` in
/// `dir`), its configuration found through the environment variable `variable` (name, value).
fn gunicorn_args(dir: &Path, port: u16, module: &str, variable: (&str, String)) -> Vec<String> {
    vec![
        format!("--bind=127.0.0.1:{port}"),
        "--workers=1".into(),
        "--timeout=300".into(),
        // `harness cluster down` stops processes one after another: an idle worker goes at once.
        "--graceful-timeout=2".into(),
        "--no-control-socket".into(),
        format!("--chdir={}", dir.display()),
        format!("--env=HARNESS_WSGI_MODULE={module}"),
        format!("--env={}={}", variable.0, variable.1),
        "wsgi_app:application".into(),
    ]
}

/// RabbitMQ's environment: its node, ports, files and Erlang cookie in `dir`, nothing of the
/// machine's broker (`/etc/rabbitmq`, `/var/lib/rabbitmq`).
fn rabbitmq_env(dir: &Path, ports: &Ports) -> Vec<(String, String)> {
    let path = |name: &str| dir.join(name).display().to_string();
    [
        ("HOME", path("")),
        ("RABBITMQ_NODENAME", "harness@localhost".into()),
        ("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1".into()),
        ("RABBITMQ_NODE_PORT", ports.rabbitmq.to_string()),
        ("RABBITMQ_DIST_PORT", ports.rabbitmq_dist.to_string()),
        ("ERL_EPMD_PORT", ports.epmd.to_string()),
        ("ERL_EPMD_ADDRESS", "127.0.0.1".into()),
        ("RABBITMQ_MNESIA_BASE", path("mnesia")),
        ("RABBITMQ_LOG_BASE", path("log")),
        ("RABBITMQ_CONFIG_FILE", path("rabbitmq")),
        ("RABBITMQ_CONF_ENV_FILE", path("rabbitmq-env.conf")),
        ("RABBITMQ_ENABLED_PLUGINS_FILE", path("enabled_plugins")),
        ("RABBITMQ_LOGS", "-".into()),
        ("RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS", "-start_epmd false".into()),
    ]
    .map(|(k, v)| (k.to_owned(), v))
    .to_vec()
}

/// Runs a setup command with its output appended to `log`; a failure shows the log's last lines.
fn run_setup(mut command: Command, log: &Path, what: &str) -> Result<()> {
    let out = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(io_err("opening", log))?;
    let err = out.try_clone().map_err(io_err("opening", log))?;
    let started = Instant::now();
    let status = command.stdout(out).stderr(err).status().map_err(|e| {
        error(CloudErrorKind::Setup, format!("{what}: cannot run {}", command.get_program().to_string_lossy()), e)
    })?;
    tracing::debug!("{what}: {:.1?}", started.elapsed());
    if status.success() {
        return Ok(());
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(12).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let failed = format!("{what} failed ({status}); the last lines of {}", log.display());
    Err(error(CloudErrorKind::Setup, failed, format!("\n{}", tail.join("\n"))))
}

async fn wait_listening(cluster: &LocalCluster, what: &str, port: u16) -> Result<()> {
    let started = Instant::now();
    loop {
        crate::check_alive(&cluster.state)?;
        if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(90) {
            return Err(cluster.timeout(&format!("{what} to listen on port {port}"), started));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The CCM's `--cloud-config` (cloud-provider-openstack's INI form): Keystone and the cluster's
/// credentials, the region, the network the nodes' addresses are on, and the router the route
/// controller adds a route to per node's pod CIDR, and the subnet Octavia's load balancers take
/// their VIP on and reach their members through. There is no external network: a load balancer's
/// VIP is its ingress (the CCM then warns that it found no floating network, and goes on).
pub fn cloud_config(state: &OpenstackState) -> String {
    format!(
        "[Global]\nauth-url = {}\nusername = {USERNAME}\npassword = {}\ntenant-name = {PROJECT}\n\
         domain-name = Default\nregion = {}\n\n[Networking]\ninternal-network-name = {NETWORK}\n\n\
         [LoadBalancer]\nenabled = true\nlb-provider = amphora\nsubnet-id = {}\n\n[Route]\nrouter-id = {}\n",
        state.auth_url, state.password, state.region, state.subnet_id, state.router_id
    )
}

/// The `OS_*` variables of the harness's environment, which the CCM would read before its cloud
/// config (`ConfigFromEnv`) and so log in elsewhere with the user's own cloud.
pub fn inherited_os_variables() -> Vec<String> {
    std::env::vars_os().filter_map(|(name, _)| name.into_string().ok()).filter(|name| name.starts_with("OS_")).collect()
}

fn write_cloud_config(path: &Path, state: &OpenstackState) -> Result<()> {
    std::fs::write(path, cloud_config(state)).map_err(io_err("writing", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_setup_step_names_itself_and_shows_the_last_lines_of_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("setup.log");
        let mut ok = Command::new("sh");
        ok.args(["-c", "echo first step done"]);
        run_setup(ok, &log, "a first step").unwrap();
        let mut failing = Command::new("sh");
        failing.args(["-c", "seq 1 20; echo 'oslo_db.exception.DBConnectionError: cannot connect'; exit 3"]);
        let error = run_setup(failing, &log, "Nova's schema").unwrap_err().to_string();
        assert!(error.starts_with("openstack cloud: Nova's schema failed (exit status: 3)"), "{error}");
        assert!(error.contains("DBConnectionError: cannot connect"), "{error}");
        assert!(!error.contains("first step done"), "only the last lines: {error}");
        let missing = run_setup(Command::new("/nonexistent/keystone-manage"), &log, "Keystone's schema").unwrap_err();
        assert!(missing.to_string().contains("cannot run /nonexistent/keystone-manage"), "{missing}");
    }

    #[test]
    fn compute_hosts_are_named_after_their_zones() {
        assert_eq!(compute_hosts(3), ["compute-a", "compute-b", "compute-c"]);
        assert_eq!(compute_hosts(1), ["compute-a"]);
    }

    #[test]
    fn gunicorn_serves_the_wrapper_on_loopback_with_the_module_and_config_in_its_environment() {
        let args = gunicorn_args(
            Path::new("/c/openstack"),
            5000,
            "keystone.wsgi.api",
            ("OS_KEYSTONE_CONFIG_FILES", "/c/k.conf".into()),
        );
        assert!(args.contains(&"--bind=127.0.0.1:5000".to_owned()), "{args:?}");
        assert!(args.contains(&"--env=HARNESS_WSGI_MODULE=keystone.wsgi.api".to_owned()), "{args:?}");
        assert!(args.contains(&"--env=OS_KEYSTONE_CONFIG_FILES=/c/k.conf".to_owned()), "{args:?}");
        // `harness cluster down` finds strays by the cluster dir in their command line.
        assert!(args.contains(&"--chdir=/c/openstack".to_owned()), "{args:?}");
        assert_eq!(args.last().map(String::as_str), Some("wsgi_app:application"));
    }

    #[test]
    fn rabbitmq_keeps_its_files_and_cookie_in_the_clusters_dir() {
        let ports = Ports::from_slice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let env: BTreeMap<String, String> = rabbitmq_env(Path::new("/c/rabbitmq"), &ports).into_iter().collect();
        assert_eq!(env["RABBITMQ_NODE_PORT"], "2");
        assert_eq!(env["ERL_EPMD_PORT"], "4");
        for (name, value) in &env {
            if name.ends_with("_BASE") || name.ends_with("_FILE") || name == "HOME" {
                assert!(value.starts_with("/c/rabbitmq"), "{name}={value}");
            }
        }
    }

    #[test]
    fn the_cloud_config_names_the_clusters_user_project_region_network_router_and_subnet() {
        let state = OpenstackState {
            ports: Ports::from_slice([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
            auth_url: "http://127.0.0.1:5/v3".into(),
            region: REGION.into(),
            admin_password: "a".into(),
            password: "p".into(),
            project_id: "pid".into(),
            network_id: "n".into(),
            subnet_id: "s".into(),
            router_id: "r".into(),
            servers: BTreeMap::new(),
            zones: BTreeMap::new(),
        };
        let text = cloud_config(&state);
        for line in [
            "auth-url = http://127.0.0.1:5/v3",
            "username = harness",
            "password = p",
            "tenant-name = harness",
            "region = RegionOne",
            "internal-network-name = nodes",
            "router-id = r",
            "lb-provider = amphora",
            "subnet-id = s",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
