//! `harness image build`: the harness's own image (`local_cluster::images::harness`), of this
//! harness's binary and the reference CCM beside it, and with `--provider` what that provider's
//! runs need offline; `harness image program`: an image of one program as its entrypoint
//! (`local_cluster::images::program`: Prow's pod utilities); `harness image push`: an archive to
//! any OCI registry (`local_cluster::images::push`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Subcommand;

use local_cluster::images::harness::{CACHE_DIR, CacheTree, Contents};
use local_cluster::images::program::Program;

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build the harness's image as an OCI image archive, with no Docker: this harness binary and
    /// the reference CCM in /usr/local/bin, the C library and CA certificates, and a providers file
    /// at /etc/cloud-provider-harness/providers.yaml. `ctr images import` takes it, and so does
    /// `harness cluster up --image`.
    Build {
        /// The archive to write.
        #[arg(long, short, default_value = "harness-image.oci.tar")]
        output: PathBuf,
        /// The image's name [default: ghcr.io/cloud-provider-harness/harness:<this harness's
        /// version>, e.g. v0.1.0-0123456789ab].
        #[arg(long)]
        reference: Option<String>,
        /// Also carry what this provider's runs need offline, built here unless cached: the
        /// Kubernetes toolchain of the release (`--kubernetes`, default the provider's first), the
        /// provider's CCM when the toolchain builds it, and its cloud's programs (moto, with
        /// Debian's python3), in the image's cache, /var/cache/cloud-provider-harness
        /// (HARNESS_CACHE_DIR). A job's pod then runs the provider's cells with no network. A
        /// provider on real nodes also gets the release's node images and what nodes run from
        /// Debian (runc, the CNI plugins, iptables, iproute2, util-linux), for a privileged pod.
        /// Repeatable: one image for several providers' jobs.
        #[arg(long = "provider", value_name = "NAME")]
        providers: Vec<String>,
        #[command(flatten)]
        version: super::VersionArg,
        #[command(flatten)]
        config: super::ConfigArg,
    },
    /// Build an image of one program, which is its entrypoint: a static binary (a Go program built
    /// with CGO_ENABLED=0) at /<its name>, the CA certificates and /tmp. Prow's pod utilities
    /// (initupload, entrypoint, sidecar) run from such images.
    Program {
        /// The program.
        binary: PathBuf,
        /// The image's name, e.g. gcr.io/k8s-prow/sidecar:v20250307-7a867cddc.
        #[arg(long)]
        reference: String,
        /// NAME=value for the image's environment, repeatable (Prow's uploads read
        /// STORAGE_EMULATOR_HOST, which its decoration does not set).
        #[arg(long, value_name = "NAME=VALUE", value_parser = env_pair)]
        env: Vec<String>,
        /// The archive to write.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Push an image archive (`harness image build`'s, or any OCI image layout in a tar of one
    /// image) to an OCI registry: its blobs, then its manifest under the tag. Credentials are
    /// those `docker login` wrote for the registry in $DOCKER_CONFIG/config.json
    /// (~/.docker/config.json); none is an anonymous push. Prints the pushed reference with its
    /// digest.
    Push {
        /// The archive to push.
        archive: PathBuf,
        /// Where to push it, registry/repository:tag [default: the name the archive carries].
        target: Option<String>,
        /// Talk plain HTTP to the registry, not HTTPS (a registry on loopback or in a cluster).
        #[arg(long)]
        plain_http: bool,
    },
}

pub async fn run_image(command: ImageCommand) -> Result<()> {
    let started = Instant::now();
    let (reference, built) = match command {
        ImageCommand::Build { output, reference, providers: names, version, config } => {
            let providers = config.load()?; // checked before anything is built
            let providers_file = match config.file() {
                Some(path) => std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
                None => config::BUNDLED.as_bytes().to_vec(),
            };
            let mut jobs = Vec::new();
            for name in &names {
                jobs.push(job_content(&providers, name, &version).await?);
            }
            let tag = ::harness::image_tag();
            let reference = reference.unwrap_or_else(|| config::prow::image(&tag));
            let name = reference.clone();
            let built =
                tokio::task::spawn_blocking(move || build_harness_image(&name, &tag, &providers_file, &jobs, &output));
            (reference, super::until_interrupted(built).await???)
        }
        ImageCommand::Program { binary, reference, env, output } => {
            let name = reference.clone();
            let built = tokio::task::spawn_blocking(move || {
                local_cluster::images::program::build(
                    &Program { reference: &name, binary: &binary, env: &env },
                    &output,
                )
            });
            (reference, super::until_interrupted(built).await???)
        }
        ImageCommand::Push { archive, target, plain_http } => {
            return push(&archive, target, plain_http, started).await;
        }
    };
    let layers: Vec<String> = built.layer_bytes.iter().map(|b| mib(*b)).collect();
    println!(
        "{reference}: {} ({}, layers {}) in {:.1} s",
        built.archive.display(),
        mib(built.bytes),
        layers.join(" + "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn push(archive: &Path, target: Option<String>, plain_http: bool, started: Instant) -> Result<()> {
    if !archive.is_file() {
        bail!("{}: no such image archive (harness image build -o FILE writes one)", archive.display());
    }
    let target = match target {
        Some(target) => target,
        None => local_cluster::images::oci::archive_reference(archive)?,
    };
    let options = local_cluster::images::push::PushOptions { plain_http, docker_config: None };
    let pushed = super::until_interrupted(local_cluster::images::push::push(archive, &target, &options)).await??;
    println!(
        "{}@{} ({} blobs, {}) in {:.1} s",
        pushed.reference,
        pushed.digest,
        pushed.blobs,
        mib(pushed.bytes),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What a provider's runs need offline: the release it runs on, and the cloud whose programs go
/// into the image with the toolchain.
struct JobContent {
    provider: String,
    release: toolchain::Release,
    ccm_bin: Option<String>,
    kwok: bool,
    /// Its cluster runs real nodes, nested in the job's (privileged) pod: the image carries the
    /// release's node images and what the nodes run from Debian.
    real_nodes: bool,
    moto: bool,
}

async fn job_content(
    providers: &config::ProvidersConfig,
    name: &str,
    version: &super::VersionArg,
) -> Result<JobContent> {
    let Some(provider) = providers.provider(name) else {
        let known: Vec<&str> = providers.providers.iter().map(|p| p.name.as_str()).collect();
        bail!("--provider {name}: no such provider in the providers file (it has {})", known.join(", "));
    };
    let config::Deployer::Local { cloud, node_kind, .. } = &provider.deployer else {
        bail!(
            "--provider {name}: its deployer is {}, and only a local deployer's cluster runs inside the job's pod",
            provider.deployer.kind().as_str()
        );
    };
    if !matches!(cloud.name, "local" | "moto") {
        bail!(
            "--provider {name}: the image carries the programs of the local and moto clouds, not yet {}'s",
            cloud.label
        );
    }
    let requested = match &version.kubernetes {
        Some(v) => Some(v.clone()),
        None => provider.kubernetes_version(None).map(|v| v.to_string()),
    };
    let version = super::VersionArg { kubernetes: requested, kubernetes_source: version.kubernetes_source.clone() };
    let ccm_bin = match &provider.ccm.build {
        config::CcmBuild::Toolchain { bin, .. } => Some(bin.clone()),
        _ => None,
    };
    Ok(JobContent {
        provider: name.to_owned(),
        release: version.release().await?,
        ccm_bin,
        kwok: *node_kind == config::nodes::NodeKind::Kwok,
        real_nodes: *node_kind == config::nodes::NodeKind::Real,
        moto: cloud.name == "moto",
    })
}

fn build_harness_image(
    reference: &str,
    tag: &str,
    providers_file: &[u8],
    jobs: &[JobContent],
    output: &Path,
) -> Result<local_cluster::images::harness::Built> {
    let harness = std::env::current_exe().context("finding this harness's own binary")?;
    let reference_ccm = toolchain::workspace::build_reference_ccm()?;
    let work = tempfile::tempdir().context("creating a work directory")?;
    // What several jobs share (a release's toolchain, its node images) goes in once.
    let (mut offline, mut debian_packages) = (Vec::<CacheTree>::new(), Vec::new());
    for job in jobs {
        let (trees, packages) = offline_trees(job, work.path())?;
        for tree in trees {
            if !offline.iter().any(|t| t.relative == tree.relative) {
                offline.push(tree);
            }
        }
        for package in packages {
            if !debian_packages.contains(&package) {
                debian_packages.push(package);
            }
        }
    }
    let contents = Contents {
        reference,
        harness: &harness,
        reference_ccm: &reference_ccm,
        providers_file,
        version: tag,
        revision: ::harness::built_from_commit(),
        offline: &offline,
        debian_packages: &debian_packages,
    };
    Ok(local_cluster::images::harness::build(&contents, output, work.path())?)
}

/// The cache directories `job` needs (built unless cached), and the Debian packages they run on.
fn offline_trees(job: &JobContent, work: &Path) -> Result<(Vec<CacheTree>, Vec<&'static str>)> {
    let cache = cli_support::roots::cache_root();
    let extra: &[&str] = if job.kwok { &["kwok"] } else { &[] };
    let kubernetes = toolchain::install_with(&job.release, false, extra)?;
    let mut trees = vec![cache_tree(&cache, &kubernetes.dir)?];
    if let Some(bin) = &job.ccm_bin {
        let binary = toolchain::install_ccm(&job.release, bin, toolchain::Libraries::default())?;
        // `<cache>/providers/<provider>/<version>/bin/<bin>`; one the toolchain builds is in its dir.
        let entry = binary.parent().and_then(Path::parent).context("a provider CCM lies in <entry>/bin")?;
        if !entry.starts_with(&kubernetes.dir) {
            trees.push(cache_tree(&cache, entry)?);
        }
    }
    let mut packages = Vec::new();
    if job.real_nodes {
        local_cluster::images::install(&job.release, &kubernetes)?;
        trees.push(cache_tree(&cache, &local_cluster::images::dir(&job.release))?);
        packages.extend_from_slice(local_cluster::real::NODE_PACKAGES);
    }
    if job.moto {
        // The virtualenv is Debian's python3's, the interpreter the image has at the same path.
        let python = Path::new("/usr/bin/python3");
        if !python.is_file() {
            bail!(
                "--provider {}: moto's virtualenv in the image is built with Debian's /usr/bin/python3, which is missing: apt-get install python3 python3-venv",
                job.provider
            );
        }
        let relative = format!("moto/{}", toolchain::aws::moto_version());
        let dir = work.join("moto-for-image").join(&relative);
        toolchain::aws::build_moto_for(&dir, python, Path::new(CACHE_DIR))?;
        trees.push(CacheTree { source: dir, relative });
        packages.push("python3");
    }
    Ok((trees, packages))
}

fn cache_tree(cache: &Path, dir: &Path) -> Result<CacheTree> {
    let relative = dir
        .strip_prefix(cache)
        .with_context(|| format!("{} is not in the cache {}", dir.display(), cache.display()))?;
    Ok(CacheTree { source: dir.to_path_buf(), relative: relative.to_string_lossy().into_owned() })
}

fn env_pair(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((name, _)) if !name.is_empty() && !name.contains(char::is_whitespace) => Ok(text.to_owned()),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
