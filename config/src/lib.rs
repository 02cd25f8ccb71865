//! `providers.yaml`: the providers the harness tests, how to build, deploy and test each one's CCM,
//! and the Kubernetes versions and CI jobs of the matrix. `docs/providers.md` documents every field.
//!
//! Loading is two steps. serde reads the file into its raw shape ([`raw`]) with unknown fields
//! refused; its errors carry the line and column. [`validate`] then checks the meaning (known
//! capabilities, kinds and suites, unique names, versions, durations, regexes, `{placeholders}`)
//! and builds the typed [`ProvidersConfig`]; it reports every problem at once, each with the line
//! and column of the node at fault, found by [`locate`]. The provider version is not in the file:
//! it is given at run time (`--provider-version`).
//!
//! Beside it: what the harness pins ([`pins`]: the Kubernetes releases and the Go modules built
//! for them), the kinds of local nodes and how many fit ([`nodes`]), and the CI configuration
//! generated from the file ([`prow`] jobs, [`testgrid`] test groups and dashboards).

pub mod clouds;
pub mod jobs;
pub mod locate;
pub mod nodes;
pub mod pins;
pub mod prow;
pub mod quick;
mod raw;
pub mod skew;
pub mod template;
pub mod testgrid;
pub mod validate;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use jobs::{Cell, cells, gcs_prefix, job_name, testgrid_input};
pub use locate::Location;
pub use template::{Placeholder, TemplateError, Vars};
pub use validate::{Diagnostic, MAX_FLAKE_ATTEMPTS, Problem};

/// The file `harness` looks for in the working directory.
pub const DEFAULT_FILE: &str = "providers.yaml";

/// The repository's own `providers.yaml` (the `local` reference provider and `local-upstream`), built into the binary
/// so that `harness run` works from any directory.
pub const BUNDLED: &str = include_str!("../../providers.yaml");

/// The text of provider `name`'s entry in [`BUNDLED`], from its `  - name: NAME` line to the next
/// entry (tests derive providers of their own from it); `None` when it has no such provider.
pub fn bundled_entry(name: &str) -> Option<&'static str> {
    let start = BUNDLED.find(&format!("\n  - name: {name}\n"))? + 1;
    let rest = &BUNDLED[start..];
    let end = rest[1..].find("\n  - name: ").map_or(rest.len(), |at| at + 2);
    Some(&rest[..end])
}

/// The text of provider `name`'s entry in the providers file `text`, as written: from its `- `
/// line to the next entry or top-level key, without the blank and comment lines before that.
pub fn provider_entry<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).ok()?;
    let providers = value.get("providers")?.as_sequence()?;
    let index = providers.iter().position(|p| p.get("name").and_then(|n| n.as_str()) == Some(name))?;
    let line = locate::YamlPath::root().key("providers").index(index).locate(text)?.line;
    let mut lines = text.split_inclusive('\n').scan(0, |offset, line| {
        let start = *offset;
        *offset += line.len();
        Some((start, line))
    });
    let (start, first) = lines.nth(line - 1)?;
    let dash = first.find('-')?;
    let mut end = start + first.len();
    for (offset, line) in lines {
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if line.len() - content.len() <= dash {
            break;
        }
        end = offset + line.len();
    }
    Some(&text[start..end])
}

/// Why `providers.yaml` could not be loaded. Every variant names the file; those about its content
/// give the line and column, and say what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "cannot read {path}: {source}; give the providers file with --config, or start from \
         docs/examples/providers.aws.yaml"
    )]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is empty: it needs a `testgrid:` section and a `providers:` list (see docs/providers.md)")]
    Empty { path: PathBuf },
    #[error("{path}:{}{message}; {hint}", location.map(|l| format!("{l}: ")).unwrap_or_else(|| " ".to_owned()))]
    Parse { path: PathBuf, location: Option<Location>, message: String, hint: &'static str },
    #[error("{}", Diagnostic::render_all(path, problems))]
    Invalid { path: PathBuf, problems: Vec<Diagnostic> },
}

impl ConfigError {
    /// Where the (first) problem is, when it is about the file's content.
    pub fn location(&self) -> Option<Location> {
        match self {
            ConfigError::Parse { location, .. } => *location,
            ConfigError::Invalid { problems, .. } => problems.first().and_then(|d| d.location),
            _ => None,
        }
    }
}

/// The whole file, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvidersConfig {
    /// The file it was read from (relative paths in it are resolved as [`Provider`] says).
    pub source: PathBuf,
    pub testgrid: TestGridSettings,
    /// The built-in suites, then the file's own, in file order.
    pub suites: Vec<Suite>,
    pub providers: Vec<Provider>,
}

impl ProvidersConfig {
    /// Reads and validates the file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text, path)
    }

    /// The repository's own `providers.yaml`, built in ([`BUNDLED`]).
    pub fn bundled() -> Self {
        Self::parse(BUNDLED, Path::new(DEFAULT_FILE)).expect("the bundled providers.yaml is valid (tested)")
    }

    /// Validates `text`, naming `source` in errors.
    pub fn parse(text: &str, source: &Path) -> Result<Self, ConfigError> {
        let path = source.to_path_buf();
        if matches!(serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text), Ok(serde_yaml_ng::Value::Null)) {
            return Err(ConfigError::Empty { path });
        }
        let raw: raw::RawFile = serde_yaml_ng::from_str(text).map_err(|error| parse_error(&path, &error))?;
        validate::validate(raw, text, &path).map_err(|problems| {
            let mut problems: Vec<Diagnostic> =
                problems.into_iter().map(|(at, problem)| Diagnostic::new(text, at, problem)).collect();
            // In file order; the unlocated (none expected) last.
            problems.sort_by_key(|d| d.location.map_or((usize::MAX, usize::MAX), |l| (l.line, l.column)));
            ConfigError::Invalid { path, problems }
        })
    }

    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// The provider a job's builds count for: the one whose `prow.jobs` lists it, else the one
    /// whose name the job carries ([`ProvidersConfig::provider_named_by_job`]).
    pub fn provider_of_job(&self, job: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.prow.jobs.iter().any(|j| j == job)).or_else(|| self.provider_named_by_job(job))
    }

    /// The provider whose name the job carries (`ci-cloud-provider-<provider>`, then the end or a
    /// separator), the longest match, so `aws-eks` wins over `aws` for
    /// `ci-cloud-provider-aws-eks-e2e`. Job names are case-sensitive paths, so the match is not:
    /// `ci-cloud-provider-BETA-e2e` carries beta's name as much as `ci-cloud-provider-beta-e2e`.
    pub fn provider_named_by_job(&self, job: &str) -> Option<&Provider> {
        let job = job.to_ascii_lowercase();
        let rest = job.strip_prefix(jobs::JOB_PREFIX)?;
        self.providers
            .iter()
            .filter(|p| {
                rest.strip_prefix(p.name.to_ascii_lowercase().as_str())
                    .is_some_and(|after| after.is_empty() || after.starts_with(['-', '.', '_']))
            })
            .max_by_key(|p| p.name.len())
    }

    pub fn suite(&self, name: &str) -> Option<&Suite> {
        self.suites.iter().find(|s| s.name == name)
    }
}

fn parse_error(path: &Path, error: &serde_yaml_ng::Error) -> ConfigError {
    let location = error.location().map(Location::from);
    let mut message = error.to_string();
    // serde_yaml_ng ends its messages with ` at line L column C`; we lead with `file:L:C:`.
    if let Some(at) = message.rfind(" at line ")
        && message[at + 9..].split(" column ").all(|n| n.parse::<usize>().is_ok())
    {
        message.truncate(at);
    }
    let hint = if message.contains("unknown field") {
        "remove it or fix its spelling (docs/providers.md lists every field)"
    } else if message.contains("missing field") {
        "add it (docs/providers.md describes it)"
    } else if message.contains("invalid type") {
        "give a value of the expected type; quote strings that look like numbers, e.g. \"1.30\""
    } else if message.contains("duplicate field") {
        "keep one of them"
    } else {
        "fix the YAML at that place (docs/providers.md shows the expected shape)"
    };
    ConfigError::Parse { path: path.to_path_buf(), location, message, hint }
}

/// Where the results go, for TestGrid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestGridSettings {
    /// The GCS bucket Prow uploads to and TestGrid reads, without `gs://`.
    pub gcs_bucket: String,
    /// A dashboard group listing every provider's dashboard; `None` when they join one defined elsewhere.
    pub dashboard_group: Option<String>,
}

/// A test suite a provider can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suite {
    pub name: String,
    /// One of [`BUILTIN_SUITES`], not defined in the file.
    pub builtin: bool,
    pub kind: SuiteKind,
    pub timeout: Duration,
    /// Runs of a failing test before it counts as failed (`flake_attempts`, default 1); a pass on a
    /// later one is recorded as flaky, never as a clean pass.
    pub flake_attempts: u32,
}

/// The suites every file has: `cloud-e2e`, `conformance`, `conformance-quick`,
/// `certified-conformance`, `upstream-load-balancers`.
pub const BUILTIN_SUITES: [&str; 5] =
    ["cloud-e2e", "conformance", "conformance-quick", "certified-conformance", UPSTREAM_LOAD_BALANCERS];
/// The built-in suite of upstream's own load-balancer tests (`[Feature:LoadBalancer]`), each skipped
/// or run by the capabilities the provider declares.
pub const UPSTREAM_LOAD_BALANCERS: &str = "upstream-load-balancers";
/// ginkgo processes of `upstream-load-balancers`: its tests wait on load balancers and traffic.
pub const UPSTREAM_LOAD_BALANCERS_PARALLEL: u16 = 4;
/// The built-in suite that runs conformance for certification and writes the submission.
pub const CERTIFIED_CONFORMANCE: &str = "certified-conformance";
/// The job a provider's `certification:` block adds on each of its release lines,
/// `ci-cloud-provider-<provider>-certified-conformance-k8s-<minor>`: it runs `certified-conformance`
/// alone, so its grid holds only full, skip-free conformance runs (test-infra#24313).
pub const CERTIFICATION_JOB: &str = CERTIFIED_CONFORMANCE;
/// How often the certification job runs: a full conformance run takes the better part of an hour.
pub const CERTIFICATION_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);
/// ginkgo processes of a certification run: serial specs run last on one of them, as Hydrophone's
/// `--parallel` runs them. Most conformance specs wait (on probes, controllers, timeouts) rather
/// than compute, so even on 2 cores 20 processes finish the parallel specs in a third of the time 4
/// take (docs/benchmarks.md, "Certification").
pub const CERTIFIED_CONFORMANCE_PARALLEL: u16 = 20;

/// Upstream's conformance tests, for ginkgo's `--focus`.
pub const CONFORMANCE_FOCUS: &str = r"\[Conformance\]";
pub use quick::QUICK_SKIP;
/// ginkgo processes of `conformance-quick`: its tests mostly wait (on pods, controllers, probes),
/// so on 2 cores 16 processes finish it sooner than 8 (docs/benchmarks.md, "`harness run` on the
/// embedded default").
pub const QUICK_PARALLEL: u16 = 16;

impl Suite {
    pub fn builtins() -> Vec<Suite> {
        let ginkgo = |focus: &str, skip: Option<&str>, parallel| SuiteKind::Ginkgo {
            focus: Some(focus.to_owned()),
            skip: skip.map(str::to_owned),
            parallel,
            args: Vec::new(),
        };
        let suite = |name: &str, kind, minutes: u64| Suite {
            name: name.to_owned(),
            builtin: true,
            kind,
            timeout: Duration::from_secs(minutes * 60),
            flake_attempts: 1,
        };
        vec![
            suite("cloud-e2e", SuiteKind::CloudE2e { focus: None, skip: None }, 30),
            suite("conformance", ginkgo(CONFORMANCE_FOCUS, None, 4), 180),
            suite("conformance-quick", ginkgo(CONFORMANCE_FOCUS, Some(&quick::quick_skip()), QUICK_PARALLEL), 60),
            suite(
                CERTIFIED_CONFORMANCE,
                SuiteKind::CertifiedConformance { parallel: CERTIFIED_CONFORMANCE_PARALLEL },
                180,
            ),
            suite(
                UPSTREAM_LOAD_BALANCERS,
                SuiteKind::UpstreamLoadBalancers { skip: None, parallel: UPSTREAM_LOAD_BALANCERS_PARALLEL },
                60,
            ),
        ]
    }
}

/// What runs a suite. Regexes (`focus`, `skip`) are kept as written: ginkgo takes Go's RE2 syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SuiteKind {
    /// The harness's built-in cloud-provider tests; `focus`/`skip` select tests by name.
    CloudE2e { focus: Option<String>, skip: Option<String> },
    /// Upstream `e2e.test` of the run's Kubernetes version under ginkgo.
    Ginkgo {
        focus: Option<String>,
        skip: Option<String>,
        /// ginkgo `--procs`.
        parallel: u16,
        /// Extra `e2e.test` flags.
        args: Vec<String>,
    },
    /// Any command; it writes `junit_*.xml` into `{artifacts}` and exits non-zero on failure.
    Exec { command: CommandSpec },
    /// Upstream conformance exactly as certification takes it (focus `[Conformance]`, nothing
    /// skipped), then the `cncf/k8s-conformance` submission of the provider's `certification:`
    /// product. Built in only.
    CertifiedConformance {
        /// ginkgo `--procs`.
        parallel: u16,
    },
    /// Upstream's load-balancer tests (`[Feature:LoadBalancer]` of the release's `e2e.test`), each
    /// run or skipped by the capabilities it needs and the provider declares.
    UpstreamLoadBalancers {
        /// Tests also left out, by name (RE2, as ginkgo's `--skip`); each reported skipped.
        skip: Option<String>,
        /// ginkgo `--procs`.
        parallel: u16,
    },
}

impl SuiteKind {
    pub const NAMES: [&str; 4] = ["cloud-e2e", "ginkgo", "exec", UPSTREAM_LOAD_BALANCERS];

    pub fn name(&self) -> &'static str {
        match self {
            SuiteKind::CloudE2e { .. } => "cloud-e2e",
            SuiteKind::Ginkgo { .. } => "ginkgo",
            SuiteKind::Exec { .. } => "exec",
            SuiteKind::CertifiedConformance { .. } => CERTIFIED_CONFORMANCE,
            SuiteKind::UpstreamLoadBalancers { .. } => UPSTREAM_LOAD_BALANCERS,
        }
    }

    /// Whether it runs upstream's `e2e.test` (of the run's Kubernetes release, from its toolchain).
    pub fn runs_e2e_test(&self) -> bool {
        matches!(
            self,
            SuiteKind::Ginkgo { .. } | SuiteKind::CertifiedConformance { .. } | SuiteKind::UpstreamLoadBalancers { .. }
        )
    }
}

/// A command to run: argv (`command` then `args` of the file), extra environment, and a working
/// directory relative to the provider's checkout. Strings may hold [`Placeholder`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub dir: Option<PathBuf>,
}

impl CommandSpec {
    /// argv and env with the placeholders filled in.
    pub fn render(&self, vars: &Vars) -> Result<(Vec<String>, BTreeMap<String, String>), TemplateError> {
        let argv = self.argv.iter().map(|arg| template::render(arg, vars)).collect::<Result<_, _>>()?;
        let env = self
            .env
            .iter()
            .map(|(key, value)| Ok((key.clone(), template::render(value, vars)?)))
            .collect::<Result<_, _>>()?;
        Ok((argv, env))
    }
}

/// One cloud provider under test.
///
/// Relative paths (`ccm.build` outputs, `dir`s, `deployer.config`, `ccm.deploy.path`) are relative
/// to the provider's checkout (`repo` at the run's provider version); `deployer.kubeconfig` is
/// relative to the working directory of `harness`.
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    /// Lower-case letters, digits and `-`; in job names.
    pub name: String,
    /// Its source repository, e.g. `https://github.com/kubernetes/cloud-provider-aws`.
    pub repo: String,
    /// The branch whose first-parent history LKG walks: the `master` release line.
    pub branch: String,
    /// Its release branches (`release-1.36`), each a release line of its own tested against that
    /// Kubernetes minor; `branch` is not among them.
    pub release_branches: Vec<String>,
    /// Existing Prow jobs whose builds count for it, and the repository whose commit is its version.
    pub prow: ProwSource,
    /// The Kubernetes versions of the matrix, in file order (the first is the default).
    pub kubernetes: Vec<KubernetesVersion>,
    pub ccm: Ccm,
    pub deployer: Deployer,
    pub capabilities: BTreeSet<Capability>,
    /// Why it lacks a capability (`unsupported:`), given with every test cloud-e2e skips for it.
    pub unsupported: BTreeMap<Capability, String>,
    /// The suites `harness run` runs for it, in order.
    pub suites: Vec<String>,
    pub required: Required,
    pub hooks: Hooks,
    /// What cloud-e2e's LoadBalancer Services carry for this cloud (`load_balancer_services:`).
    pub load_balancer_services: LoadBalancerServices,
    /// The flake policy of `harness bisect`: runs of a failing commit before it counts as bad
    /// (`flake.runs`, default 1; a pass in any of them makes the commit good).
    pub flake_runs: u32,
    /// Tests allowed to fail, each with its reason and link (`known_failures:`): a run whose only
    /// failures are these passes, and says which.
    pub known_failures: Vec<KnownFailure>,
    /// The CI jobs per Kubernetes version; one running every suite unless the file splits them.
    pub jobs: Vec<JobSpec>,
    pub testgrid: ProviderTestGrid,
    /// The product a `certified-conformance` run certifies (`PRODUCT.yaml`); its values may hold
    /// `{provider_version}` and `{kubernetes_version}`, filled in at run time.
    pub certification: Option<certification::Product>,
}

impl Provider {
    /// The entry of `known_failures` that covers `test` of `suite`, if one does.
    pub fn known_failure(&self, suite: &str, test: &str) -> Option<&KnownFailure> {
        self.known_failures.iter().find(|known| known.covers(suite, test))
    }

    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    /// The version of the matrix a run asks for: the first when `None`; else `v1.37.1`, `1.37.1`,
    /// or a release line `v1.37` / `1.37`.
    pub fn kubernetes_version(&self, requested: Option<&str>) -> Option<&KubernetesVersion> {
        let Some(requested) = requested.map(str::trim) else { return self.kubernetes.first() };
        let wanted = requested.strip_prefix('v').unwrap_or(requested);
        self.kubernetes.iter().find(|v| v.to_string()[1..] == *wanted || v.minor_line() == wanted)
    }

    /// The release line of each branch it tests: `master` for `branch`, `1.36` for
    /// `release-1.36`.
    pub fn release_lines(&self) -> Vec<(String, String)> {
        let mut lines = vec![(lkg::DEFAULT_LINE.to_owned(), self.branch.clone())];
        lines.extend(self.release_branches.iter().filter_map(|b| Some((release_line_of(b)?, b.clone()))));
        lines
    }

    /// The `org/repo` whose commit in `started.json` `repos` is this provider's version.
    pub fn prow_repo(&self) -> Option<String> {
        self.prow.repo.clone().or_else(|| self.github_repo().map(|(owner, repo)| format!("{owner}/{repo}")))
    }

    /// `(owner, repo)` when `repo` is a GitHub URL.
    pub fn github_repo(&self) -> Option<(&str, &str)> {
        let path = self.repo.strip_prefix("https://github.com/")?.trim_end_matches('/');
        let (owner, repo) = path.split_once('/')?;
        let repo = repo.strip_suffix(".git").unwrap_or(repo);
        (!owner.is_empty() && !repo.is_empty() && !repo.contains('/')).then_some((owner, repo))
    }
}

/// How to get the CCM and run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ccm {
    pub build: CcmBuild,
    pub deploy: CcmDeploy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CcmBuild {
    /// `cargo build -p <package> --bin <bin>` in this workspace: the bundled reference CCM.
    Cargo { package: String, bin: String, timeout: Duration },
    /// A command in the provider's checkout that produces a binary or a manifest.
    Command { command: CommandSpec, output: BuildOutput, timeout: Duration },
    /// A CCM of the run's Kubernetes toolchain ([`pins::TOOLCHAIN_CCMS`]), built from the
    /// Go module proxy with it (`harness toolchain install`): upstream's controllers at that release.
    Toolchain { bin: String, timeout: Duration },
}

impl CcmBuild {
    pub fn kind(&self) -> &'static str {
        match self {
            CcmBuild::Cargo { .. } => "cargo",
            CcmBuild::Command { .. } => "command",
            CcmBuild::Toolchain { .. } => "toolchain",
        }
    }

    /// The build yields a binary (`{ccm_binary}`), not a manifest.
    pub fn produces_binary(&self) -> bool {
        matches!(
            self,
            CcmBuild::Cargo { .. }
                | CcmBuild::Toolchain { .. }
                | CcmBuild::Command { output: BuildOutput::Binary(_), .. }
        )
    }

    /// How long the build may take.
    pub fn timeout(&self) -> Duration {
        match self {
            CcmBuild::Cargo { timeout, .. }
            | CcmBuild::Command { timeout, .. }
            | CcmBuild::Toolchain { timeout, .. } => *timeout,
        }
    }
}

/// What a command build leaves behind, relative to the provider's checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildOutput {
    Binary(PathBuf),
    Manifest(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CcmDeploy {
    /// The binary runs as a process of the harness, next to the cluster; `args` are all its flags.
    Process { args: Vec<String>, env: BTreeMap<String, String>, timeout: Duration },
    /// `kubectl apply` of a manifest: `path`, or the one the build produced when `None`.
    Manifest { path: Option<PathBuf>, timeout: Duration },
    /// Any command (helm, kustomize, a script) against `{kubeconfig}`.
    Command { command: CommandSpec, timeout: Duration },
}

impl CcmDeploy {
    pub fn kind(&self) -> &'static str {
        match self {
            CcmDeploy::Process { .. } => "process",
            CcmDeploy::Manifest { .. } => "manifest",
            CcmDeploy::Command { .. } => "command",
        }
    }

    /// How long to wait for the deploy and then for every node to be initialised by the CCM.
    pub fn timeout(&self) -> Duration {
        match self {
            CcmDeploy::Process { timeout, .. }
            | CcmDeploy::Manifest { timeout, .. }
            | CcmDeploy::Command { timeout, .. } => *timeout,
        }
    }
}

/// The vSphere tags of a `cloud: vcsim` inventory: a host per zone, each tagged with its zone, and
/// the datacenter tagged with the region; the CCM's `[Labels]` read them (categories `k8s-zone`
/// and `k8s-region`). No zones: the CCM is configured without zone labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VsphereTags {
    pub zones: Vec<String>,
    pub region: Option<String>,
}

impl VsphereTags {
    /// What the bundled `vsphere` provider uses when providers.yaml gives no tags.
    pub fn default_tags() -> Self {
        VsphereTags {
            zones: ["zone-a", "zone-b", "zone-c"].map(String::from).to_vec(),
            region: Some("region-1".into()),
        }
    }

    /// The hosts of the inventory: one per zone, one when there are no zones.
    pub fn hosts(&self) -> u32 {
        self.zones.len().max(1) as u32
    }

    /// The most nodes the inventory's hosts hold.
    pub fn max_nodes(&self) -> u32 {
        self.hosts() * crate::nodes::VCSIM_VMS_PER_HOST
    }
}

/// What brings the cluster up and down. The Kubernetes version comes from the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deployer {
    /// The embedded cluster: control plane processes and nodes (real kubelets, or kwok's simulated
    /// ones), with a cloud of its own.
    Local {
        nodes: u32,
        cloud: &'static clouds::CloudFacts,
        node_kind: crate::nodes::NodeKind,
        /// The zone and region tags of a cloud with a tagged inventory (vcsim's hosts).
        tags: Option<VsphereTags>,
    },
    /// A cluster that is already there; `None` means `$KUBECONFIG`, else `~/.kube/config`.
    Existing { kubeconfig: Option<PathBuf> },
    /// `kind create cluster` with the external cloud provider; a kind config and/or a node image.
    Kind { config: Option<PathBuf>, image: Option<String> },
    /// `kubetest2 <deployer> <args> --up/--down`, i.e. `kubetest2-<deployer>`.
    Kubetest2 { deployer: String, args: Vec<String> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeployerKind {
    Local,
    Existing,
    Kind,
    Kubetest2,
}

impl DeployerKind {
    pub const ALL: [DeployerKind; 4] =
        [DeployerKind::Local, DeployerKind::Existing, DeployerKind::Kind, DeployerKind::Kubetest2];

    pub fn as_str(self) -> &'static str {
        match self {
            DeployerKind::Local => "local",
            DeployerKind::Existing => "existing",
            DeployerKind::Kind => "kind",
            DeployerKind::Kubetest2 => "kubetest2",
        }
    }
}

impl Deployer {
    pub fn kind(&self) -> DeployerKind {
        match self {
            Deployer::Local { .. } => DeployerKind::Local,
            Deployer::Existing { .. } => DeployerKind::Existing,
            Deployer::Kind { .. } => DeployerKind::Kind,
            Deployer::Kubetest2 { .. } => DeployerKind::Kubetest2,
        }
    }
}

/// What a provider's cloud supports; cloud-e2e runs the tests of the capabilities declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// InstancesV2: providerID, instance type, addresses, existence.
    Instances,
    /// Zone and region labels.
    Zones,
    /// Shut-down instances taint their node (needs the shutdown/start hooks).
    NodeShutdown,
    /// Terminated instances delete their node (needs the terminate hook).
    NodeDeletion,
    LoadBalancers,
    /// `spec.loadBalancerSourceRanges`.
    LoadBalancerSourceRanges,
    /// `node.kubernetes.io/exclude-from-external-load-balancers`.
    LoadBalancerNodeExclusion,
    /// UDP service ports.
    LoadBalancerUdp,
    /// Pod routes for `spec.podCIDRs`.
    Routes,
    /// Load balancers carry traffic: TCP and UDP through the ingress IP reach pods, source ranges
    /// and node exclusion hold for real (needs nodes that run pods).
    LoadBalancerDataPath,
    /// IPv4 and IPv6 node addresses and services.
    DualStack,
    /// `externalTrafficPolicy: Local`: the load balancer sends traffic only to nodes whose
    /// `healthCheckNodePort` answers (those with a ready endpoint).
    LoadBalancerHealthChecks,
    /// `externalTrafficPolicy: Local`: pods behind the load balancer see the client's own address.
    LoadBalancerSourceIp,
    /// `sessionAffinity: ClientIP` holds for clients coming through the load balancer.
    LoadBalancerSessionAffinity,
    /// `allocateLoadBalancerNodePorts: false`: the load balancer reaches pods without a NodePort.
    LoadBalancerWithoutNodePorts,
}

impl Capability {
    pub const ALL: [Capability; 15] = [
        Capability::Instances,
        Capability::Zones,
        Capability::NodeShutdown,
        Capability::NodeDeletion,
        Capability::LoadBalancers,
        Capability::LoadBalancerSourceRanges,
        Capability::LoadBalancerNodeExclusion,
        Capability::LoadBalancerUdp,
        Capability::Routes,
        Capability::DualStack,
        Capability::LoadBalancerDataPath,
        Capability::LoadBalancerHealthChecks,
        Capability::LoadBalancerSourceIp,
        Capability::LoadBalancerSessionAffinity,
        Capability::LoadBalancerWithoutNodePorts,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Instances => "instances",
            Capability::Zones => "zones",
            Capability::NodeShutdown => "node-shutdown",
            Capability::NodeDeletion => "node-deletion",
            Capability::LoadBalancers => "load-balancers",
            Capability::LoadBalancerSourceRanges => "load-balancer-source-ranges",
            Capability::LoadBalancerNodeExclusion => "load-balancer-node-exclusion",
            Capability::LoadBalancerUdp => "load-balancer-udp",
            Capability::Routes => "routes",
            Capability::DualStack => "dual-stack",
            Capability::LoadBalancerDataPath => "load-balancer-data-path",
            Capability::LoadBalancerHealthChecks => "load-balancer-health-checks",
            Capability::LoadBalancerSourceIp => "load-balancer-source-ip",
            Capability::LoadBalancerSessionAffinity => "load-balancer-session-affinity",
            Capability::LoadBalancerWithoutNodePorts => "load-balancer-without-node-ports",
        }
    }

    /// `instances, zones, ...`
    pub fn list() -> String {
        Capability::ALL.map(Capability::as_str).join(", ")
    }
}

impl FromStr for Capability {
    type Err = ();

    fn from_str(name: &str) -> Result<Self, ()> {
        Capability::ALL.into_iter().find(|c| c.as_str() == name).ok_or(())
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What must pass for a (Kubernetes, provider) pair to be good.
#[derive(Debug, Clone, PartialEq)]
pub struct Required {
    /// Every test of these suites (all of the provider's suites unless the file narrows them).
    pub suites: Vec<String>,
    /// And these tests, of whichever suite.
    pub tests: Vec<TestMatcher>,
}

/// A required test: by exact name, or every test whose name matches.
#[derive(Debug, Clone)]
pub enum TestMatcher {
    Name(String),
    Regex(regex::Regex),
}

impl TestMatcher {
    pub fn matches(&self, test: &str) -> bool {
        match self {
            TestMatcher::Name(name) => name == test,
            TestMatcher::Regex(regex) => regex.is_match(test),
        }
    }
}

/// A test a provider accepts failing, as SovereignCloudStack's standards allow "a fixed list of tests
/// ... each with a description of why".
#[derive(Debug, Clone, PartialEq)]
pub struct KnownFailure {
    pub test: TestMatcher,
    /// Only in this suite; in any when `None`.
    pub suite: Option<String>,
    pub reason: String,
    /// Where the failure is tracked (an issue).
    pub link: String,
}

impl KnownFailure {
    pub fn covers(&self, suite: &str, test: &str) -> bool {
        self.suite.as_deref().is_none_or(|only| only == suite) && self.test.matches(test)
    }
}

impl PartialEq for TestMatcher {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TestMatcher::Name(a), TestMatcher::Name(b)) => a == b,
            (TestMatcher::Regex(a), TestMatcher::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

/// Commands cloud-e2e calls to act on the cloud behind Kubernetes' back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    pub terminate_instance: Option<Hook>,
    pub shutdown_instance: Option<Hook>,
    pub start_instance: Option<Hook>,
    /// Prints the cloud's load balancers (to check none leaked).
    pub list_load_balancers: Option<Hook>,
    /// Dials a load balancer's ingress IP from a client of the cloud's network and prints the
    /// answer; called with `--ip IP --port P [--udp] [--send TEXT]` appended. Without it, the
    /// data-path tests dial from the test runner itself.
    pub probe_load_balancer: Option<Hook>,
    /// Runs a test program as a client on the cloud's network, its command line appended (the
    /// `local` provider's is `harness cluster exec`): `upstream-load-balancers` runs `e2e.test`
    /// through it, as upstream's tests dial load balancers from the test process. Without it,
    /// `e2e.test` runs where the harness does, as on a real cloud.
    pub run_on_cloud_network: Option<Hook>,
}

/// Annotations and a class the cloud needs on a LoadBalancer Service to give it what a test asks
/// for (an AWS UDP port needs an NLB: `service.beta.kubernetes.io/aws-load-balancer-type: nlb`).
/// cloud-e2e puts them on every Service it creates; upstream's tests create their own Services,
/// which these do not reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalancerServices {
    /// On every LoadBalancer Service.
    pub annotations: BTreeMap<String, String>,
    /// Also on a Service with a UDP port (they win over `annotations`).
    pub udp_annotations: BTreeMap<String, String>,
    /// `spec.loadBalancerClass` of every Service (but the one testing that another class is left alone).
    pub load_balancer_class: Option<String>,
}

impl LoadBalancerServices {
    /// The annotations of a Service, with a UDP port or not.
    pub fn annotations_for(&self, udp: bool) -> BTreeMap<String, String> {
        let mut annotations = self.annotations.clone();
        if udp {
            annotations.extend(self.udp_annotations.clone());
        }
        annotations
    }
}

/// A hook: argv with placeholders (`{node}` in the instance hooks) and how long it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub command: CommandSpec,
    pub timeout: Duration,
}

/// One CI job per Kubernetes version: a name suffix (`None` for a provider's single default job),
/// the suites it runs and how often (Prow `interval`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub name: Option<String>,
    pub suites: Vec<String>,
    pub interval: Duration,
    /// The job a `certification:` block adds: [`CERTIFICATION_JOB`], running only
    /// `certified-conformance`, shown on the provider's `conformance-*` dashboard.
    pub certification: bool,
}

impl JobSpec {
    /// The certification job of a provider with a `certification:` block.
    pub fn certification() -> Self {
        JobSpec {
            name: Some(CERTIFICATION_JOB.to_owned()),
            suites: vec![CERTIFIED_CONFORMANCE.to_owned()],
            interval: CERTIFICATION_INTERVAL,
            certification: true,
        }
    }
}

/// Existing CI (Prow's pod-utils, kubetest2) as an LKG source: builds that carry no harness
/// metadata, only Prow's standard fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProwSource {
    /// Job names (`ci-cloud-provider-gcp-e2e-latest`) whose builds are this provider's.
    pub jobs: Vec<String>,
    /// The `org/repo` key of `started.json` `repos` whose commit is the provider's version;
    /// by default the one `repo` names on GitHub.
    pub repo: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderTestGrid {
    /// The dashboard its jobs are tabs of; default `cloud-provider-<name>`.
    pub dashboard: String,
    /// Consecutive failures before TestGrid alerts; default 3.
    pub num_failures_to_alert: u16,
}

/// The release line a `release-1.36` branch tests (`1.36`); `None` for another name.
pub fn release_line_of(branch: &str) -> Option<String> {
    let line = branch.strip_prefix("release-")?;
    let (major, minor) = line.split_once('.')?;
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (numeric(major) && numeric(minor)).then(|| line.to_owned())
}

/// A Kubernetes version: a release, `vMAJOR.MINOR.PATCH` with an optional `-pre.release` suffix, or
/// a CI build's version as upstream's `hack/lib/version.sh` makes it from `git describe`
/// (`v1.37.1-3+0123456789abcd`, `v1.38.0-alpha.1.234+3f2a6b1c0d9e8f`, `…-dirty`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KubernetesVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// e.g. `alpha.1`, `rc.0`, `3` (three commits after a release).
    pub pre: Option<String>,
    /// What follows `+`: the commit's abbreviated hash (and `-dirty`) of a CI build.
    pub build: Option<String>,
}

impl KubernetesVersion {
    /// `1.37`: the release line, as used in job names.
    pub fn minor_line(&self) -> String {
        format!("{}.{}", self.major, self.minor)
    }

    /// A CI build's version (it has a `+build`), not a release's.
    pub fn is_ci_build(&self) -> bool {
        self.build.is_some()
    }
}

impl FromStr for KubernetesVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "`{text}` is not a Kubernetes version ({why}): write a release like v1.37.1 or v1.38.0-alpha.1, \
                 or a CI build's like v1.37.1-3+0123456789abcd"
            )
        };
        let rest = text.strip_prefix('v').ok_or_else(|| bad("it must start with `v`"))?;
        let (core, build) = match rest.split_once('+') {
            Some((core, build)) => (core, Some(build)),
            None => (rest, None),
        };
        let (numbers, pre) = match core.split_once('-') {
            Some((numbers, pre)) => (numbers, Some(pre)),
            None => (core, None),
        };
        let parts: Vec<&str> = numbers.split('.').collect();
        let [major, minor, patch] = parts[..] else { return Err(bad("it needs major.minor.patch")) };
        let number = |part: &str| {
            let canonical =
                !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && (part == "0" || !part.starts_with('0'));
            canonical.then(|| part.parse::<u32>().ok()).flatten().ok_or_else(|| bad("each part is a number"))
        };
        // Semver's identifiers: dot-separated, each of letters, digits and `-`.
        let identifiers =
            |s: &str| s.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
        if pre.is_some_and(|pre| !identifiers(pre)) {
            return Err(bad("the pre-release is dot-separated letters, digits and `-`"));
        }
        if build.is_some_and(|build| !identifiers(build)) {
            return Err(bad("what follows `+` is dot-separated letters, digits and `-`"));
        }
        Ok(KubernetesVersion {
            major: number(major)?,
            minor: number(minor)?,
            patch: number(patch)?,
            pre: pre.map(str::to_owned),
            build: build.map(str::to_owned),
        })
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)?;
        if let Some(pre) = &self.pre {
            write!(f, "-{pre}")?;
        }
        match &self.build {
            Some(build) => write!(f, "+{build}"),
            None => Ok(()),
        }
    }
}
