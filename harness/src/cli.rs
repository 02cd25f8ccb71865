//! The `harness` command line: clap definitions and what each command does.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use cli_support::signals;

mod bisect;
mod conformance;
mod image;
mod lkg_command;
mod prow_config;
mod publish_command;
mod run;
mod suite;
#[cfg(test)]
mod tests;
mod token;

/// `--version`: the package's and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("HARNESS_GIT_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(name = "harness", version = VERSION, about = "Conformance and last-known-good testing for Kubernetes cloud providers")]
#[command(
    after_help = "Environment:\n  HARNESS_CACHE_DIR  toolchain cache (default: <user cache dir>/cloud-provider-harness)\n  HARNESS_STATE_DIR  local cluster state (default: <user state dir>/cloud-provider-harness)\n  HARNESS_DATA_DIR   published builds and their index (default: <user data dir>/cloud-provider-harness)\n  RUST_LOG           log filter (default: info)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build and cache the Kubernetes binaries (from the Go module proxy) the local cluster runs.
    #[command(subcommand)]
    Toolchain(ToolchainCommand),
    /// Local clusters: a real control plane on loopback, real or simulated nodes, and an emulated cloud.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Run one provider × Kubernetes version end to end, as a CI job does: build the CCM, bring a
    /// cluster up, deploy the CCM, run the suites, bring the cluster down, publish the results.
    Run(run::RunArgs),
    /// Run one built-in suite against a cluster that is already up (`harness suite cloud-e2e`).
    #[command(subcommand)]
    Suite(suite::SuiteCommand),
    /// Conformance certification: check a cncf/k8s-conformance submission folder.
    #[command(subcommand)]
    Conformance(conformance::ConformanceCommand),
    /// Run the matrix of providers.yaml (provider × Kubernetes version), one cluster per cell.
    Matrix(run::MatrixArgs),
    /// Upload a build directory to the store in the Prow layout TestGrid reads, and index it; or,
    /// with --remote, post it to a central `harness serve` that does.
    Publish(publish_command::PublishArgs),
    /// Rebuild the SQL index from the store (the store is the source of truth).
    Index(publish_command::IndexArgs),
    /// Last known good: which Kubernetes commit each provider last passed with, the version set
    /// good with all of them, and culprit ranges (computed from the SQL index).
    #[command(subcommand)]
    Lkg(lkg_command::LkgCommand),
    /// Find the commit that broke a provider: bisect its culprit range (from the LKG, or
    /// --good/--bad), each point a real run of the provider built at that commit, published as a
    /// build of job bisect-<provider>-<line>. Resumes from those builds when started again.
    Bisect(bisect::BisectArgs),
    /// Serve the ingestion API (`POST /api/v1/builds`), the LKG API (`/api/v1/lkg`, documented in
    /// lkg/openapi.yaml), the dashboard, `/healthz`, `/readyz` and `/metrics`, reloading the LKG
    /// from the SQL index as builds are published. Several replicas may share one Postgres.
    Serve(ServeArgs),
    /// Publish tokens for the ingestion API, one provider each (stored hashed in the SQL index).
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Apply the SQL index's migrations and exit (every command also does on first use; this is
    /// for a deployment's migration Job).
    Migrate {
        #[command(flatten)]
        database: token::DatabaseArg,
    },
    /// Print the Prow periodic jobs (with TestGrid annotations) for every provider × Kubernetes
    /// version of providers.yaml, so the matrix runs on Prow (and, with --postsubmits, a postsubmit
    /// per provider and job on the provider's repository).
    ProwConfig(prow_config::ProwArgs),
    /// The harness's own image, which the Prow jobs and deploy/ run.
    #[command(subcommand)]
    Image(image::ImageCommand),
    /// Print the TestGrid configuration (test groups, dashboards, dashboard group) for every
    /// provider × Kubernetes version job of providers.yaml.
    TestgridConfig {
        #[command(flatten)]
        config: ConfigArg,
        /// Write it to this file instead of stdout.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0: a free one, printed on the first line).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// Reload the LKG at least this often (commit histories move even when no build arrives).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub refresh: std::time::Duration,
    /// How often to check the index for new builds (the LKG is reloaded when there are).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub poll: std::time::Duration,
    /// The largest body `POST /api/v1/builds` takes (413 above it).
    #[arg(long, default_value_t = upload::Limits::default().max_body_bytes, value_name = "BYTES")]
    pub max_upload_bytes: u64,
    /// The largest file of an uploaded build.
    #[arg(long, default_value_t = upload::Limits::default().max_file_bytes, value_name = "BYTES")]
    pub max_file_bytes: u64,
    /// The most files an uploaded build may have.
    #[arg(long, default_value_t = upload::Limits::default().max_files, value_name = "N")]
    pub max_upload_files: usize,
    /// Uploads read at once; the rest wait their turn (memory stays under N × --max-upload-bytes).
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub concurrent_uploads: usize,
    /// Of --concurrent-uploads, the most one provider may take, so one provider's stalled or slow
    /// uploads never starve the others [default: half of --concurrent-uploads].
    #[arg(long, value_name = "N")]
    pub uploads_per_provider: Option<usize>,
    /// The longest an upload's body may take to arrive (408 after it), and the longest an upload
    /// waits for a place (503 with Retry-After after it).
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
    pub upload_read_timeout: std::time::Duration,
    /// After SIGINT or SIGTERM, the longest requests in flight may take before serve exits anyway.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub shutdown_timeout: std::time::Duration,
    /// How often to index builds the store holds and the index lacks (a replica that died between
    /// the two); also done on start. 0: on start only.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub reconcile_every: std::time::Duration,
    /// Expire the passed and skipped test results of builds that started longer ago than this
    /// (e.g. 90d), checked hourly. Builds, their LKG verdicts, failed and flaky results and every
    /// status (packed per build) are kept; the store is never touched [default: keep everything].
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub keep_results: Option<std::time::Duration>,
    /// Where build directories are, for the dashboard's logs and artifacts: a directory,
    /// file:///dir, gs://bucket[/prefix] or s3://bucket[/prefix] [default: <user data
    /// dir>/cloud-provider-harness/results, where `harness run` publishes].
    #[arg(long, env = "HARNESS_STORE", value_name = "URL")]
    pub store: Option<String>,
    /// Create the database (SQLite) and apply its migrations if needed; without it a SQLite file
    /// that does not exist is an error (the deployment runs `harness migrate` as a Job first).
    #[arg(long)]
    pub migrate: bool,
    #[command(flatten)]
    pub source: lkg_command::SourceArgs,
}

#[derive(Debug, Args)]
pub struct ConfigArg {
    /// The providers file [default: ./providers.yaml if present, else the built-in one (the `local`
    /// reference provider)].
    #[arg(long = "config", env = "HARNESS_CONFIG", value_name = "FILE")]
    pub path: Option<std::path::PathBuf>,
}

impl ConfigArg {
    pub fn load(&self) -> Result<config::ProvidersConfig> {
        Ok(match self.file() {
            Some(path) => config::ProvidersConfig::load(path)?,
            None => config::ProvidersConfig::bundled(),
        })
    }

    /// The file given, else ./providers.yaml if present; `None`: the built-in one.
    pub fn file(&self) -> Option<std::path::PathBuf> {
        let default = std::path::Path::new(config::DEFAULT_FILE);
        self.path.clone().or_else(|| default.is_file().then(|| default.to_path_buf()))
    }
}

#[derive(Debug, Subcommand)]
pub enum ToolchainCommand {
    /// Build the binaries of a Kubernetes version from the Go module proxy: the control plane
    /// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), kubectl, e2e.test,
    /// ginkgo and go-runner, what real nodes run (kubelet, kube-proxy, containerd with its shim and
    /// ctr, CoreDNS), the conformance images' programs (agnhost, sample-apiserver, nonewprivs,
    /// wget), the image registry and netproxy, and the images real nodes run (docs/real-nodes.md);
    /// a no-op for what is already cached. kwok and local-upstream-ccm are built the first time a
    /// cluster or a provider needs them (or with --all).
    Install {
        #[command(flatten)]
        version: VersionArg,
        /// Install every pinned version (what the test suite needs for the version matrix) with the
        /// binaries otherwise built on first use (kwok, local-upstream-ccm), the built-in
        /// providers' CCMs for each (aws, vsphere, openstack), and what each emulated cloud runs
        /// (moto; vcsim with govc; OpenStack's services, which need Debian's mariadb-server and
        /// rabbitmq-server, as scripts/test installs them).
        #[arg(long, conflicts_with_all = ["kubernetes", "kubernetes_source"])]
        all: bool,
        /// Rebuild even if the cache holds the version (e.g. after it was reported corrupt).
        #[arg(long)]
        force: bool,
    },
    /// The pinned Kubernetes versions and whether each is installed.
    List,
    /// Print the directory holding the binaries of a version (for `$(harness toolchain path)/kubectl`).
    Path {
        #[command(flatten)]
        version: VersionArg,
    },
    /// Check every cached binary of a version against the SHA-256 recorded when it was built.
    Verify {
        #[command(flatten)]
        version: VersionArg,
    },
}

#[derive(Debug, Args)]
pub struct VersionArg {
    /// Kubernetes version: v1.37.1, 1.37 (newest pinned patch), any release or pre-release tag the
    /// Go module proxy serves (v1.37.2, v1.38.0-beta.0: pinned at run time and cached), or latest,
    /// latest-1.37 (the newest release the proxy serves, else the newest cached)
    #[arg(long = "kubernetes", value_name = "VERSION")]
    pub kubernetes: Option<String>,
    /// A kubernetes/kubernetes git checkout to build Kubernetes from, at whatever commit it is (under
    /// Prow, the path alias k8s.io/kubernetes): versioned as upstream's hack/lib/version.sh does,
    /// cached by commit
    #[arg(long, value_name = "DIR", conflicts_with = "kubernetes", env = "HARNESS_KUBERNETES_SOURCE")]
    pub kubernetes_source: Option<std::path::PathBuf>,
}

impl VersionArg {
    /// The release `--kubernetes` names (an embedded pin, else one pinned from the Go module proxy)
    /// or `--kubernetes-source` builds.
    async fn release(&self) -> Result<toolchain::Release> {
        if let Some(dir) = &self.kubernetes_source {
            return Ok(toolchain::from_checkout(dir)?);
        }
        let Some(requested) = resolve_marker(self.kubernetes.clone()).await? else {
            return Ok(toolchain::default_release());
        };
        let work = tokio::task::spawn_blocking(move || toolchain::resolve_or_pin(&requested));
        Ok(until_interrupted(work).await???)
    }

    /// The release `--kubernetes` names among those pinned already (embedded or earlier).
    async fn pinned(&self) -> Result<toolchain::Release> {
        if let Some(dir) = &self.kubernetes_source {
            return Ok(toolchain::from_checkout(dir)?);
        }
        Ok(toolchain::resolve(resolve_marker(self.kubernetes.clone()).await?.as_deref())?)
    }
}

/// `--kubernetes` with a marker (`latest`, `latest-1.37`) replaced by the release tag it stands for.
pub async fn resolve_marker(requested: Option<String>) -> Result<Option<String>> {
    let Some(requested) = requested else { return Ok(None) };
    let work =
        tokio::task::spawn_blocking(move || toolchain::resolve_marker(&requested).map(|tag| tag.unwrap_or(requested)));
    Ok(Some(until_interrupted(work).await???))
}

#[derive(Debug, Args)]
pub struct NameArg {
    /// Cluster name.
    #[arg(long, default_value = local_cluster::DEFAULT_NAME)]
    pub name: String,
}

/// `--cloud`: a cloud of [`local_cluster::clouds::REGISTRY`], each with its line of help.
fn cloud_names() -> clap::builder::PossibleValuesParser {
    use clap::builder::PossibleValue;
    let clouds = local_cluster::clouds::REGISTRY.iter().map(|kind| kind.facts());
    clap::builder::PossibleValuesParser::new(clouds.map(|facts| PossibleValue::new(facts.name).help(facts.about)))
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Bring a local cluster up and wait until its nodes are Ready.
    Up {
        #[command(flatten)]
        name: NameArg,
        /// Number of nodes.
        #[arg(long, default_value_t = 3)]
        nodes: u32,
        /// What the nodes are: `real` (kubelet, containerd and runc in namespaces of their own,
        /// pods really run; needs root, and runs the local cloud when `--cloud` names none) or `kwok`
        /// (simulated; scales to thousands, nothing runs in a pod). Default: the cloud's own
        /// (`moto`'s is kwok), else real.
        #[arg(long, value_enum)]
        node_kind: Option<local_cluster::NodeKind>,
        #[command(flatten)]
        version: VersionArg,
        /// Port for kube-apiserver on 127.0.0.1 (default: a free one).
        #[arg(long)]
        api_server_port: Option<u16>,
        /// Also run a cloud, with a machine per node. With `local`, `up` also starts the bundled
        /// reference CCM and waits until it has initialised every node; a provider's cloud leaves
        /// its CCM to you (the nodes keep their uninitialized taint until it runs with the
        /// cluster's cloud config, as `harness run --provider <name>` does). Real nodes imply
        /// `local` when no cloud is given.
        #[arg(long, value_parser = cloud_names())]
        cloud: Option<String>,
        /// The reference-ccm binary for `--cloud local` (default: build it from this workspace).
        #[arg(long)]
        ccm_binary: Option<std::path::PathBuf>,
        /// Also build upstream's conformance image, registry.k8s.io/conformance:<version> (the
        /// release's e2e.test, ginkgo, kubectl and go-runner), and import it into the real nodes,
        /// so that Hydrophone or Sonobuoy can run conformance in the cluster.
        #[arg(long)]
        conformance_image: bool,
        /// Also import this OCI image archive (`harness image build`'s, or any OCI image layout
        /// in a tar) into every real node, under the name it carries; repeatable.
        #[arg(long = "image", value_name = "ARCHIVE")]
        images: Vec<std::path::PathBuf>,
        /// Make a port of a service on this machine's 127.0.0.1 reachable from the real nodes'
        /// pods at 10.250.0.1:<PORT>, the hub's address (the cluster has no other way out): a GCS
        /// emulator that Prow's pod utilities upload to, say; repeatable. Each is also a registry
        /// to the nodes' containerd over plain HTTP: an image pushed to a registry on that port
        /// (`harness image push --plain-http`) is pulled as 10.250.0.1:<PORT>/<repository>:<tag>.
        #[arg(long = "hub-port", value_name = "PORT")]
        hub_ports: Vec<u16>,
    },
    /// Stop every process of a cluster and remove its state.
    Down {
        #[command(flatten)]
        name: NameArg,
    },
    /// The local clusters on this machine.
    List,
    /// Print the path of a cluster's kubeconfig.
    Kubeconfig {
        #[command(flatten)]
        name: NameArg,
    },
    /// Shut down, start or terminate the machine of a node of a cluster with a cloud: its cloud
    /// instance (the local cloud's, moto's EC2 instance, vcsim's VM) and its kubelet together (the
    /// built-in providers' cloud-e2e hooks).
    Instance {
        #[command(flatten)]
        name: NameArg,
        #[arg(value_enum)]
        action: local_cluster::machines::MachineAction,
        /// The node (= instance) name.
        node: String,
    },
    /// Print the load balancers of a cluster's cloud as JSON: the local cloud's, moto's or Octavia's (with listeners, pools and members).
    LoadBalancers {
        #[command(flatten)]
        name: NameArg,
    },
    /// Print the routes a cluster's cloud holds for its pod CIDRs as JSON: the local cloud's, or
    /// the OpenStack router's (`destination`, `nexthop`).
    Routes {
        #[command(flatten)]
        name: NameArg,
    },
    /// Dial a load balancer's ingress IP of a cluster with real nodes from a client on the cloud's
    /// network (a namespace of its own on the hub) and print what came back; exit non-zero with
    /// the reason when nothing did (the `local` provider's `probe_load_balancer` hook).
    LbProbe {
        #[command(flatten)]
        name: NameArg,
        #[command(flatten)]
        dial: DialArgs,
        /// The client's address: 10.250.0.210 to 10.250.0.254.
        #[arg(long, default_value_t = local_cluster::probe::DEFAULT_SOURCE)]
        source: std::net::Ipv4Addr,
    },
    /// Run a program as a client on the network of a cluster with real nodes: in a network
    /// namespace of its own on the cluster's hub, where load balancers' ingress IPs, nodes and pods
    /// are reachable and kube-apiserver answers at the kubeconfig's address. Exits with the
    /// program's status (the `local` provider's `run_on_cloud_network` hook, through which
    /// `upstream-load-balancers` runs e2e.test).
    Exec {
        #[command(flatten)]
        name: NameArg,
        /// The program and its arguments, after `--`.
        #[arg(required = true, last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Dial from this process's network namespace (what lb-probe runs inside its client namespace).
    #[command(hide = true)]
    LbDial {
        #[command(flatten)]
        dial: DialArgs,
    },
}

/// What lb-probe dials.
#[derive(Debug, Clone, clap::Args)]
pub struct DialArgs {
    /// The ingress IP.
    #[arg(long)]
    pub ip: std::net::IpAddr,
    /// The load balancer's port.
    #[arg(long)]
    pub port: u16,
    /// UDP instead of TCP (needs --send).
    #[arg(long)]
    pub udp: bool,
    /// Text to send once connected (TCP: then the sending side is closed).
    #[arg(long)]
    pub send: Option<String>,
    /// How long to wait for the connection and for the answer.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub timeout: std::time::Duration,
}

impl DialArgs {
    fn dial(self) -> local_cluster::probe::Dial {
        local_cluster::probe::Dial {
            ip: self.ip,
            port: self.port,
            udp: self.udp,
            send: self.send,
            timeout: self.timeout,
        }
    }
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Toolchain(command) => run_toolchain(command).await,
        Command::Cluster(command) => run_cluster(command).await,
        Command::Run(args) => run::run_one(args).await,
        Command::Matrix(args) => run::run_matrix(args).await,
        Command::Suite(command) => suite::run_suite(command).await,
        Command::Conformance(command) => conformance::run_conformance(command).await,
        Command::Publish(args) => publish_command::run_publish(args).await,
        Command::Index(args) => publish_command::run_index(args).await,
        Command::Lkg(command) => lkg_command::run_lkg(command).await,
        Command::Bisect(args) => bisect::run_bisect(args).await,
        Command::Serve(args) => {
            let options = serve::ServeOptions {
                listen: args.listen,
                refresh: args.refresh,
                poll: args.poll,
                limits: upload::Limits {
                    max_body_bytes: args.max_upload_bytes,
                    max_file_bytes: args.max_file_bytes,
                    max_files: args.max_upload_files,
                },
                concurrent_uploads: args.concurrent_uploads,
                uploads_per_provider: args
                    .uploads_per_provider
                    .unwrap_or_else(|| serve::uploads::Uploads::default_share(args.concurrent_uploads)),
                upload_read_timeout: args.upload_read_timeout,
                shutdown_timeout: args.shutdown_timeout,
                reconcile_every: args.reconcile_every,
                keep_results: args.keep_results,
                config: args.source.config.load()?,
                database: args.source.database(),
                migrate: args.migrate,
                store: args.store.unwrap_or_else(results::default_store_url),
                lkg: args.source.options(),
            };
            serve::serve(options).await
        }
        Command::Token(command) => token::run_token(command).await,
        Command::Migrate { database } => {
            let index = results::index::Index::open(&database.url()).await?;
            println!("{} is at the latest schema", index.name());
            Ok(())
        }
        Command::Image(command) => image::run_image(command).await,
        Command::ProwConfig(args) => {
            let yaml = config::prow::prow_yaml(&args.config.load()?, &args.options()?);
            write_or_print(args.output, &yaml)
        }
        Command::TestgridConfig { config, output } => {
            let yaml = config::testgrid::generate_yaml(&config::jobs::testgrid_input(&config.load()?))?;
            write_or_print(output, &yaml)
        }
    }
}

fn write_or_print(output: Option<std::path::PathBuf>, text: &str) -> Result<()> {
    match output {
        Some(path) => std::fs::write(&path, text).with_context(|| format!("writing {}", path.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// A provider's pinned CCM for every pinned Kubernetes release.
async fn install_provider_ccm(ccm: &'static toolchain::provider_ccm::ProviderCcm, force: bool) -> Result<()> {
    let mut built = std::collections::BTreeSet::new();
    for release in toolchain::releases() {
        // One release may serve two minors (vsphere's): built once even with --force.
        let again = ccm.version(&release).is_ok_and(|version| !built.insert(version));
        let work =
            tokio::task::spawn_blocking(move || ccm.install(&release, force && !again, toolchain::Libraries::Pinned));
        let binary = until_interrupted(work).await???;
        println!("{} for Kubernetes {}: {}", ccm.project, release.version, binary.display());
    }
    Ok(())
}

async fn run_toolchain(command: ToolchainCommand) -> Result<()> {
    match command {
        ToolchainCommand::Install { version, all, force } => {
            if all {
                // What the clouds need from the machine, before anything is built for them.
                for cloud in local_cluster::clouds::REGISTRY {
                    cloud.check_host()?;
                }
            }
            // A tag no embedded pin names is pinned from the Go module proxy first.
            let releases = if all { toolchain::releases() } else { vec![version.release().await?] };
            for release in releases {
                let work = tokio::task::spawn_blocking(move || {
                    let on_demand: &[&str] = if all { toolchain::ON_DEMAND } else { &[] };
                    // The images here, not at the first `cluster up`: that is the run a newcomer times.
                    let (installed, _) = local_cluster::images::install_alongside(&release, || {
                        toolchain::install_with(&release, force, on_demand)
                    })?;
                    anyhow::Ok(installed)
                });
                let installed = until_interrupted(work).await???;
                println!("Kubernetes {} toolchain: {}", installed.version, installed.dir.join("bin").display());
                let images = local_cluster::images::registry_index(&release);
                let images = images.parent().expect("the index lies in the images' dir");
                println!("Kubernetes {} node images: {}", installed.version, images.display());
            }
            if all {
                // What each emulated cloud declares: its provider's CCM for each Kubernetes minor,
                // and the cloud's own programs.
                for cloud in local_cluster::clouds::REGISTRY {
                    if let Some(ccm) = cloud.provider_ccm() {
                        install_provider_ccm(ccm, force).await?;
                    }
                    let work = tokio::task::spawn_blocking(move || cloud.install(force));
                    for line in until_interrupted(work).await??? {
                        println!("{line}");
                    }
                }
            }
        }
        ToolchainCommand::List => {
            for release in toolchain::releases() {
                let status = match toolchain::installed(&release) {
                    Ok(t) => format!("installed  {}", t.dir.display()),
                    Err(toolchain::ToolchainError::NotInstalled { .. }) => "not installed".to_string(),
                    Err(e) => format!("broken: {e}"),
                };
                let default = if release.version == toolchain::default_release().version { " (default)" } else { "" };
                println!("{}{default}\t{status}", release.version);
            }
        }
        ToolchainCommand::Path { version } => {
            let release = version.pinned().await?;
            println!("{}", toolchain::installed(&release)?.dir.join("bin").display());
        }
        ToolchainCommand::Verify { version } => {
            let release = version.pinned().await?;
            let verified = tokio::task::spawn_blocking(move || toolchain::verify(&release)).await??;
            println!("Kubernetes {} toolchain verified: {}", verified.version, verified.dir.display());
        }
    }
    Ok(())
}

async fn run_cluster(command: ClusterCommand) -> Result<()> {
    match command {
        ClusterCommand::Up {
            name,
            nodes,
            node_kind,
            version,
            api_server_port,
            cloud,
            ccm_binary,
            conformance_image,
            images,
            hub_ports,
        } => {
            let release = version.release().await?;
            // Real nodes need a CCM to lift the uninitialized taint: the default cloud's reference CCM.
            let default = config::clouds::default_cloud().name;
            let cloud_facts = cloud.as_deref().and_then(config::clouds::named);
            let node_kind = node_kind
                .or(cloud_facts.map(|facts| facts.default_node_kind()))
                .unwrap_or(local_cluster::NodeKind::Real);
            let cloud = cloud.or((node_kind == local_cluster::NodeKind::Real).then(|| default.to_owned()));
            if ccm_binary.is_some() && cloud.as_deref() != Some(default) {
                anyhow::bail!(
                    "--ccm-binary is the reference CCM of --cloud {default}: add --cloud {default}, or leave --ccm-binary out"
                );
            }
            let mut options = local_cluster::UpOptions::new(name.name, release);
            (options.nodes, options.node_kind, options.api_server_port) = (nodes, node_kind, api_server_port);
            (options.conformance_image, options.images, options.hub_ports) = (conformance_image, images, hub_ports);
            let options = match cloud {
                Some(cloud) => {
                    let settings =
                        local_cluster::clouds::CloudSettings { reference_ccm: ccm_binary, start_ccm: true, tags: None };
                    tokio::task::spawn_blocking(move || options.on_cloud(&cloud, &settings)).await??
                }
                None => options,
            };
            let cluster = until_interrupted(local_cluster::up(options)).await??;
            let state = &cluster.state;
            println!(
                "Cluster '{}' is up: Kubernetes {}, {} nodes, API server {}",
                state.name,
                state.kubernetes_version,
                state.nodes.len(),
                state.api_server
            );
            println!("kubeconfig: {}", state.kubeconfig.display());
            println!("Bring it down with: harness cluster down --name {}", state.name);
        }
        ClusterCommand::Down { name } => {
            if local_cluster::down(&name.name)? {
                println!("Cluster '{}' is down", name.name);
            } else {
                println!("No cluster named '{}'; nothing to do", name.name);
            }
        }
        ClusterCommand::List => {
            for entry in local_cluster::list() {
                match entry {
                    Ok(c) => println!(
                        "{}\t{}\t{}\t{} nodes\t{}",
                        c.name, c.status, c.kubernetes_version, c.nodes, c.api_server
                    ),
                    Err(e) => println!("?\tbroken\t{e}"),
                }
            }
        }
        ClusterCommand::Kubeconfig { name } => println!("{}", local_cluster::kubeconfig_path(&name.name)?.display()),
        ClusterCommand::Instance { name, action, node } => {
            let instance = local_cluster::machines::act(&name.name, &node, action).await?;
            println!("instance {} of node {node}: {}", instance.id, instance.state);
        }
        ClusterCommand::LoadBalancers { name } => {
            let balancers = local_cluster::machines::load_balancers(&name.name).await?;
            println!("{}", serde_json::to_string_pretty(&balancers)?);
        }
        ClusterCommand::Routes { name } => {
            let routes = local_cluster::machines::routes(&name.name).await?;
            println!("{}", serde_json::to_string_pretty(&routes)?);
        }
        ClusterCommand::LbProbe { name, dial, source } => {
            let dial = dial.dial();
            let answer =
                tokio::task::spawn_blocking(move || local_cluster::probe::probe(&name.name, source, &dial)).await??;
            print!("{}", answer.map_err(anyhow::Error::msg)?);
        }
        ClusterCommand::Exec { name, command } => {
            let session =
                tokio::task::spawn_blocking(move || local_cluster::probe::Session::open(&name.name)).await??;
            let code = exec_in_session(&session, &command).await;
            drop(session);
            std::process::exit(code?);
        }
        ClusterCommand::LbDial { dial } => {
            let dial = dial.dial();
            let answer = tokio::task::spawn_blocking(move || local_cluster::probe::dial(&dial)).await?;
            print!("{}", answer.map_err(anyhow::Error::msg)?);
        }
    }
    Ok(())
}

/// Runs `command` in `session`'s namespace until it ends, and returns its exit code (128 + the
/// signal that ended it). SIGINT reaches the program from the terminal or process group it shares
/// with this one, so it only keeps this process alive to clean up after it; SIGTERM is passed on.
async fn exec_in_session(session: &local_cluster::probe::Session, command: &[String]) -> Result<i32> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut child = tokio::process::Command::new("nsenter");
    child.arg(format!("--net={}", session.netns().display())).arg("--").args(command);
    signals::with_default_signals_async(&mut child);
    let mut child = child.spawn().with_context(|| format!("starting nsenter for {}", command[0]))?;
    let pid = child.id().map(|id| nix::unistd::Pid::from_raw(id as i32));
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {
                if let Some(pid) = pid {
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
                }
            }
        }
    };
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1))
}

/// Runs `work` until it ends or a SIGINT/SIGTERM arrives ([`signals::until_interrupted`]).
pub async fn until_interrupted<T>(work: impl std::future::Future<Output = T>) -> Result<T> {
    Ok(signals::until_interrupted(work).await?)
}

/// Exit code for an error: 130 for an interruption (as shells report SIGINT), 1 otherwise.
pub fn exit_code(error: &anyhow::Error) -> i32 {
    if error.downcast_ref::<signals::Interrupted>().is_some() { 130 } else { 1 }
}
