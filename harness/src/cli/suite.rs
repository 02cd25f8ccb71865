//! `harness suite`: run one built-in suite against a cluster that is already up.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use super::ConfigArg;
use config::template::{Placeholder, Vars};
use harness::suites::cloud_e2e::CloudE2eSuite;
use harness::suites::{SuiteContext, SuiteRunner, known_failures, metadata};

#[derive(Debug, Subcommand)]
pub enum SuiteCommand {
    /// The provider-agnostic CCM tests, for the provider's capabilities and hooks of providers.yaml;
    /// JUnit goes to <artifacts>/junit_cloud-e2e.xml. Exits 1 when a test failed.
    CloudE2e(CloudE2eArgs),
    /// Upstream's load-balancer tests (`[Feature:LoadBalancer]` of the release's e2e.test), each run
    /// or skipped by the capabilities the provider declares, through its `run_on_cloud_network`
    /// hook; JUnit goes to <artifacts>/junit_upstream-load-balancers.xml. With --plan, prints what
    /// each test would do for the provider (run, skip and why, unmapped) and runs nothing.
    UpstreamLoadBalancers(UpstreamLoadBalancersArgs),
}

/// The cluster a suite runs against, and where its JUnit goes.
#[derive(Debug, Args)]
pub struct Target {
    /// The cluster's kubeconfig [default: $KUBECONFIG, else ~/.kube/config].
    #[arg(long, conflicts_with = "cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// A local cluster (`harness cluster up --cloud local`): its kubeconfig, CCM and cloud fill in
    /// the hooks' placeholders.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Where the JUnit file goes.
    #[arg(long, env = "ARTIFACTS", default_value = "./_artifacts")]
    pub artifacts: PathBuf,
}

#[derive(Debug, Args)]
pub struct UpstreamLoadBalancersArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The provider whose capabilities and hooks apply.
    #[arg(long, default_value = "local")]
    pub provider: String,
    /// The Kubernetes release whose e2e.test runs (the toolchain's) [default: the provider's first].
    #[arg(long)]
    pub kubernetes: Option<String>,
    #[command(flatten)]
    pub target: Target,
    /// ginkgo processes.
    #[arg(long, default_value_t = config::UPSTREAM_LOAD_BALANCERS_PARALLEL)]
    pub parallel: u16,
    /// Time for the whole suite.
    #[arg(long, default_value = "60m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Print each test's decision for the provider (a line each: run, unmapped, or skip with the
    /// capability and reason) and run nothing.
    #[arg(long)]
    pub plan: bool,
    /// Runs of a failing test before it counts as failed; a pass on a later one is recorded as
    /// flaky (a suite's `flake_attempts` in providers.yaml).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=config::MAX_FLAKE_ATTEMPTS as i64))]
    pub flake_attempts: u32,
}

#[derive(Debug, Args)]
pub struct CloudE2eArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The provider whose capabilities and hooks apply.
    #[arg(long, default_value = "local")]
    pub provider: String,
    #[command(flatten)]
    pub target: Target,
    /// Run only the tests whose names match this regex.
    #[arg(long)]
    pub focus: Option<String>,
    /// Skip the tests whose names match this regex.
    #[arg(long)]
    pub skip: Option<String>,
    /// The CCM's /healthz when it runs outside the cluster (a CCM pod is found through its Lease).
    #[arg(long)]
    pub ccm_healthz_url: Option<String>,
    /// A placeholder value for the hooks, NAME=VALUE (e.g. --var cluster=prod-1); repeatable.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(Placeholder, String)>,
    /// Time for the whole suite.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Runs of a failing test before it counts as failed; a pass on a later one is recorded as
    /// flaky (a suite's `flake_attempts` in providers.yaml).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=config::MAX_FLAKE_ATTEMPTS as i64))]
    pub flake_attempts: u32,
}

fn parse_var(text: &str) -> Result<(Placeholder, String), String> {
    let (name, value) = text.split_once('=').ok_or_else(|| format!("{text:?} is not NAME=VALUE"))?;
    let placeholder = Placeholder::from_name(name)
        .ok_or_else(|| format!("unknown placeholder {name:?}; the placeholders are {}", Placeholder::list()))?;
    Ok((placeholder, value.to_owned()))
}

pub async fn run_suite(command: SuiteCommand) -> Result<()> {
    match command {
        SuiteCommand::CloudE2e(args) => run_cloud_e2e(args).await,
        SuiteCommand::UpstreamLoadBalancers(args) => run_upstream_load_balancers(args).await,
    }
}

async fn run_upstream_load_balancers(args: UpstreamLoadBalancersArgs) -> Result<()> {
    use harness::suites::upstream_load_balancers::{self as upstream, Decision, UpstreamLoadBalancersSuite};
    let config = args.config.load()?;
    let Some(provider) = config.provider(&args.provider) else {
        let known: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
        bail!("unknown provider {:?}: providers.yaml defines {}", args.provider, known.join(", "));
    };
    let version = match &args.kubernetes {
        Some(version) => version.clone(),
        None => {
            provider.kubernetes.first().map(|v| v.to_string()).context("the provider lists no Kubernetes version")?
        }
    };
    let release = toolchain::resolve(Some(&version))?;
    let binaries = harness::suites::ginkgo::Binaries::of(&toolchain::installed(&release).with_context(|| {
        format!("the toolchain of {version} is not installed: harness toolchain install --kubernetes {version}")
    })?);
    if args.plan {
        let listed = upstream::list_tests(&binaries.e2e_test).await.map_err(anyhow::Error::msg)?;
        let planned = upstream::plan(&listed, &upstream::table(), &provider.capabilities, &provider.unsupported, None);
        for test in planned {
            let decision = match test.decision {
                Decision::Run => "run".to_owned(),
                Decision::RunUnmapped => "run (unmapped)".to_owned(),
                Decision::Skip { capability, .. } => format!("skip ({capability})"),
                Decision::Excluded { .. } => "skip (the suite's skip)".to_owned(),
            };
            println!("{decision:<50} {}", test.name);
        }
        return Ok(());
    }
    let (kubeconfig, vars) = target(&args.target, &[])?;
    let suite = UpstreamLoadBalancersSuite::new(config::UPSTREAM_LOAD_BALANCERS, args.parallel, provider, vars.clone())
        .with_binaries(binaries)
        .with_flake_attempts(args.flake_attempts);
    let ctx = SuiteContext {
        kubeconfig,
        artifacts: args.target.artifacts.clone(),
        provider: provider.name.clone(),
        kubernetes_version: version,
        vars,
        timeout: args.timeout,
    };
    let outcome = super::until_interrupted(suite.run(&ctx)).await??;
    let (outcome, _) = known_failures::apply(provider, config::UPSTREAM_LOAD_BALANCERS, outcome);
    println!("{}: {}", config::UPSTREAM_LOAD_BALANCERS, outcome.summary);
    for file in &outcome.junit {
        println!("  junit: {}", file.display());
    }
    if !outcome.passed {
        bail!("{} failed: {}", config::UPSTREAM_LOAD_BALANCERS, outcome.summary);
    }
    Ok(())
}

/// The kubeconfig of the cluster under test, and the placeholders its hooks use: a local
/// cluster's (`--cluster`), else a kubeconfig's.
fn target(target: &Target, extra: &[(Placeholder, String)]) -> Result<(PathBuf, Vars)> {
    let mut vars = Vars::new();
    vars.insert(Placeholder::Artifacts, target.artifacts.display().to_string());
    if let Ok(exe) = std::env::current_exe() {
        vars.insert(Placeholder::Harness, exe.display().to_string());
    }
    let kubeconfig = match target.cluster.as_deref() {
        Some(name) => {
            let state = local_cluster::load_state(name)?;
            vars.insert(Placeholder::Cluster, state.name.clone());
            vars.insert(Placeholder::ClusterCidr, state.cluster_cidr().into());
            vars.insert(Placeholder::CloudStateDir, local_cluster::cloud_state_dir(name).display().to_string());
            if let Some(port) = state.ccm_port {
                vars.insert(Placeholder::SecurePort, port.to_string());
            }
            state.kubeconfig
        }
        None => target
            .kubeconfig
            .clone()
            .or_else(default_kubeconfig)
            .context("no --kubeconfig, $KUBECONFIG or ~/.kube/config")?,
    };
    vars.insert(Placeholder::Kubeconfig, kubeconfig.display().to_string());
    vars.extend(extra.iter().cloned());
    Ok((kubeconfig, vars))
}

async fn run_cloud_e2e(args: CloudE2eArgs) -> Result<()> {
    let config = args.config.load()?;
    let Some(provider) = config.provider(&args.provider) else {
        let known: Vec<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
        bail!("unknown provider {:?}: providers.yaml defines {}", args.provider, known.join(", "));
    };
    let (kubeconfig, vars) = target(&args.target, &args.vars)?;
    let mut healthz = args.ccm_healthz_url.clone();
    if let Some(name) = &args.target.cluster {
        let state = local_cluster::load_state(name)?;
        healthz = healthz.or(state.ccm_url.as_ref().map(|url| format!("{url}/healthz")));
    }

    let suite = CloudE2eSuite::new("cloud-e2e", provider, args.focus.as_deref(), args.skip.as_deref())?
        .with_ccm_healthz_url(healthz)
        .with_flake_attempts(args.flake_attempts);
    let ctx = SuiteContext {
        kubeconfig,
        artifacts: args.target.artifacts.clone(),
        provider: provider.name.clone(),
        kubernetes_version: String::new(),
        vars,
        timeout: args.timeout,
    };
    let outcome = super::until_interrupted(suite.run(&ctx)).await??;
    let (outcome, _) = known_failures::apply(provider, "cloud-e2e", outcome);
    record_job_version(&ctx.kubeconfig, &args.target.artifacts).await;
    println!("cloud-e2e: {}", outcome.summary);
    for file in &outcome.junit {
        println!("  junit: {}", file.display());
    }
    if !outcome.passed {
        bail!("cloud-e2e failed: {}", outcome.summary);
    }
    Ok(())
}

/// The tested server's version as `job-version` in `$ARTIFACTS/metadata.json`, which kubetest2's
/// exec tester leaves empty ([`metadata`]); a warning when it cannot be had.
async fn record_job_version(kubeconfig: &std::path::Path, artifacts: &std::path::Path) {
    let recorded = match metadata::server_version(kubeconfig).await {
        Ok(version) => {
            metadata::record_job_version(artifacts, &version).map_err(|e| e.to_string()).map(|wrote| (version, wrote))
        }
        Err(e) => Err(e),
    };
    let file = artifacts.join("metadata.json");
    match recorded {
        Ok((version, true)) => println!("  job-version: {version} ({})", file.display()),
        Ok((version, false)) => {
            println!("  job-version: kept the one {} names (the server is {version})", file.display())
        }
        Err(e) => tracing::warn!("metadata.json: job-version not recorded: {e}"),
    }
}

fn default_kubeconfig() -> Option<PathBuf> {
    std::env::var_os("KUBECONFIG").map(PathBuf::from).or_else(|| dirs::home_dir().map(|h| h.join(".kube/config")))
}
