//! Prow job configuration for the CI matrix: one periodic per [`Cell`] (provider × Kubernetes release
//! line × job), running `harness run` for that cell, annotated for TestGrid; and, when asked
//! ([`ProwOptions::postsubmits`]), a postsubmit per provider and job on the provider's repository.
//!
//! The document is what Prow's `--job-config-path` reads: `periodics: [...]`, `postsubmits: {org/repo:
//! [...]}`. Field names are the JSON tags of Prow's own types (`sigs.k8s.io/prow` `pkg/config/jobs.go`
//! and `pkg/apis/prowjobs/v1/types.go`, which Prow reads through `sigs.k8s.io/yaml`):
//! `Periodic.{interval}`, `Postsubmit.{branches}`, `JobBase.{name, cluster, labels, annotations, spec}`,
//! `UtilityConfig.{decorate, extra_refs, decoration_config}`, `DecorationConfig.{timeout,
//! skip_cloning}` and whatever else the operator gives ([`ProwOptions::decoration`]),
//! `Refs.{org, repo, base_ref, path_alias, workdir, clone_uri}`; `spec` is a Kubernetes `PodSpec`
//! (`containers[].{image, command, args, env, resources, securityContext}`; privileged where the
//! cluster has real nodes). `tests/prow_config.rs` runs Prow's
//! `checkconfig` on the output.
//!
//! Each job is decorated (`decorate: true`): Prow's pod utilities clone the harness repository
//! (`extra_refs`, `workdir: true`, so the job starts in the checkout and `harness` finds its
//! `providers.yaml` there), set `JOB_NAME`, `BUILD_ID` and `ARTIFACTS` in the test container's
//! environment, and upload `$ARTIFACTS` and the build's `started.json`/`finished.json` to
//! `gs://<bucket>/logs/<job>/<build>/`, where TestGrid reads them. The container passes them on as
//! `$(JOB_NAME)`, `$(BUILD_ID)`, `$(ARTIFACTS)`, which Kubernetes expands from that environment (the
//! pod utilities add those variables before the entrypoint options that carry the arguments).
//! `harness run` writes its junit files and `metadata.json` into `$ARTIFACTS` (the sidecar merges
//! the latter into Prow's `finished.json`, whose metadata TestGrid's column headers show).
//! `harness run --timeout` is a little shorter than Prow's timeout ([`Timeouts`]), so that the
//! harness, not Prow, stops a run that overruns, and still brings the cluster down and publishes.
//!
//! The TestGrid annotations are those TestGrid's configurator (`transfigure` for Prow instances other
//! than k8s.io's) turns into a test group and a tab: `testgrid-dashboards` (the provider's dashboard,
//! or a certification job's `conformance-*` one; it must exist, e.g. from `harness testgrid-config`), `testgrid-tab-name`,
//! `testgrid-num-failures-to-alert`, `testgrid-alert-email` (only when one is given) and `description`.
//!
//! Output is deterministic: jobs sorted by name, maps sorted by key, fields in a fixed order.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::jobs::JOB_PREFIX;
use super::validate::format_duration;
use super::{Cell, Deployer, ProvidersConfig, cells};

#[cfg(test)]
mod tests;

/// The repository of the harness's image (`harness image build`), which the jobs run: `harness` on
/// its `PATH`, tagged with the harness's version ([`image`]), never `:latest`, so a node that has
/// it never pulls it again.
pub const IMAGE_REPOSITORY: &str = "ghcr.io/cloud-provider-harness/harness";
/// The jobs' `--config` when they clone nothing ([`ProwOptions::skip_cloning`]): where the
/// harness's image carries the providers.yaml it is built with.
pub const IMAGE_PROVIDERS_FILE: &str = "/etc/cloud-provider-harness/providers.yaml";

/// The harness's image at `tag` (`v0.1.0-0123456789ab`).
pub fn image(tag: &str) -> String {
    format!("{IMAGE_REPOSITORY}:{tag}")
}
/// Prow's name for its default build cluster.
pub const DEFAULT_CLUSTER: &str = "default";
/// This harness's repository, which each job clones and runs in.
pub const DEFAULT_REPO: &str = "cloud-provider-harness/cloud-provider-harness";
pub const DEFAULT_BASE_REF: &str = "main";
/// Added to a job's own timeouts (CCM build and deploy, suites) for the rest of what `harness run
/// --timeout` bounds: the toolchain and bringing the cluster up.
pub const RUN_SLACK: Duration = Duration::from_secs(15 * 60);
/// What Prow's timeout leaves after `harness run --timeout`: bringing the cluster down, publishing,
/// and the pod utilities' upload.
pub const TEARDOWN_SLACK: Duration = Duration::from_secs(15 * 60);

/// What the jobs have in common, beyond `providers.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProwOptions {
    /// The test container's image ([`DEFAULT_IMAGE`]).
    pub image: String,
    /// The Prow build cluster ([`DEFAULT_CLUSTER`]).
    pub cluster: String,
    /// The harness repository the job clones and starts in ([`DEFAULT_REPO`]).
    pub repo: RepoRef,
    /// Its branch ([`DEFAULT_BASE_REF`]).
    pub base_ref: String,
    /// Where Prow clones it, under `$GOPATH/src` (default `github.com/<org>/<repo>`).
    pub path_alias: Option<String>,
    /// `decoration_config.timeout`, after which Prow kills the job; `None`: [`Timeouts::for_cell`].
    /// `harness run --timeout` is [`TEARDOWN_SLACK`] less.
    pub timeout: Option<Duration>,
    /// The providers file, relative to the checkout, passed as `--config`; `None`: none is passed,
    /// so `harness` reads `./providers.yaml` of the checkout.
    pub config_path: Option<String>,
    /// `testgrid-alert-email` of every job; `None` leaves the annotation out.
    pub alert_email: Option<String>,
    /// Extra labels of every job (e.g. Prow presets such as `preset-service-account: "true"`).
    pub labels: BTreeMap<String, String>,
    /// Extra environment of the test container.
    pub env: BTreeMap<String, String>,
    /// The test container's resources.
    pub resources: ResourceRequirements,
    /// A kubernetes/kubernetes branch every job tests instead of the matrix's releases: the pod
    /// utilities clone it at [`KUBERNETES_PATH_ALIAS`] and `harness run` builds it
    /// (`--kubernetes-source`); one job per provider and job of the newest minor, named
    /// `…-k8s-<branch>`, certification jobs left out (they certify releases).
    pub kubernetes_ref: Option<String>,
    /// `decoration_config.skip_cloning`: no repository is cloned; the jobs read the image's
    /// providers.yaml ([`IMAGE_PROVIDERS_FILE`]) unless [`ProwOptions::config_path`] names another.
    pub skip_cloning: bool,
    /// `clone_uri` of the harness repository's ref: where clonerefs clones it from (a mirror, an
    /// in-cluster git server) instead of GitHub.
    pub clone_uri: Option<String>,
    /// More `decoration_config` fields of every job (Prow's `DecorationConfig`, e.g.
    /// `gcs_configuration`, `utility_images`, `grace_period`), over the Prow instance's defaults;
    /// the timeout is [`ProwOptions::timeout`]'s.
    pub decoration: BTreeMap<String, serde_yaml_ng::Value>,
    /// Also a postsubmit per provider and job of its newest minor on the provider's own repository
    /// (its `repo` and `branch`): each push runs `harness run` with the provider's checkout
    /// (`--provider-dir`) at the pushed commit (`--provider-version $(PULL_BASE_SHA)`).
    pub postsubmits: bool,
}

/// Where Prow's clonerefs puts kubernetes/kubernetes, under `$GOPATH/src`: its import path, as
/// every k/k job has it.
pub const KUBERNETES_PATH_ALIAS: &str = "k8s.io/kubernetes";

/// The pod utilities' `$GOPATH` in a decorated job's containers (Prow's code mount).
pub const PROW_GOPATH: &str = "/home/prow/go";

impl Default for ProwOptions {
    fn default() -> Self {
        ProwOptions {
            image: image(concat!("v", env!("CARGO_PKG_VERSION"))),
            cluster: DEFAULT_CLUSTER.to_owned(),
            repo: DEFAULT_REPO.parse().expect("DEFAULT_REPO is org/repo"),
            base_ref: DEFAULT_BASE_REF.to_owned(),
            path_alias: None,
            timeout: None,
            config_path: None,
            alert_email: None,
            labels: BTreeMap::new(),
            env: BTreeMap::new(),
            resources: ResourceRequirements::default(),
            kubernetes_ref: None,
            skip_cloning: false,
            clone_uri: None,
            decoration: BTreeMap::new(),
            postsubmits: false,
        }
    }
}

/// A GitHub repository, `org/repo`. Parses `org/repo` or `https://github.com/org/repo[.git]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoRef {
    pub org: String,
    pub repo: String,
}

impl FromStr for RepoRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let trimmed = text.trim();
        let path = trimmed.strip_prefix("https://github.com/").unwrap_or(trimmed).trim_end_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let valid = |part: &str| {
            !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        match path.split_once('/') {
            Some((org, repo)) if valid(org) && valid(repo) => {
                Ok(RepoRef { org: org.to_owned(), repo: repo.to_owned() })
            }
            _ => Err(format!("`{text}` is not a GitHub repository: write it as org/repo")),
        }
    }
}

impl fmt::Display for RepoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.org, self.repo)
    }
}

/// Prow's job configuration, reduced to periodics and postsubmits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProwConfig {
    pub periodics: Vec<Periodic>,
    /// By repository (`org/repo`), as Prow's `JobConfig.PostsubmitsStatic`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub postsubmits: BTreeMap<String, Vec<Postsubmit>>,
}

impl ProwConfig {
    /// The job config file Prow reads, without a header.
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("Prow job config serializes to YAML")
    }
}

/// Prow's `Postsubmit` (with its `Brancher`), reduced to the fields we set: its repository is the
/// one it is listed under, cloned at the pushed commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Postsubmit {
    pub name: String,
    /// Regular expressions of the branches whose pushes run it.
    pub branches: Vec<String>,
    #[serde(flatten)]
    pub job: JobBase,
}

/// Prow's `Periodic`, reduced to the fields we set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Periodic {
    pub name: String,
    /// Go duration syntax (`6h`, `1h30m`).
    pub interval: String,
    #[serde(flatten)]
    pub job: JobBase,
}

/// What every kind of Prow job has after its name: Prow's `JobBase` and `UtilityConfig`, reduced to
/// the fields we set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobBase {
    pub cluster: String,
    pub decorate: bool,
    pub decoration_config: DecorationConfig,
    pub extra_refs: Vec<Refs>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub spec: PodSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecorationConfig {
    /// Go duration syntax.
    pub timeout: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_cloning: Option<bool>,
    /// The operator's other fields ([`ProwOptions::decoration`]), as given.
    #[serde(flatten)]
    pub more: BTreeMap<String, serde_yaml_ng::Value>,
}

/// Prow's `Refs`: a repository the pod utilities clone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refs {
    pub org: String,
    pub repo: String,
    pub base_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_alias: Option<String>,
    /// The test container starts in this checkout.
    pub workdir: bool,
    /// Where clonerefs clones it from, instead of GitHub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_uri: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSpec {
    pub containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
}

/// A Kubernetes `Volume`, as far as a job needs one: an `emptyDir`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub name: String,
    #[serde(rename = "emptyDir")]
    pub empty_dir: EmptyDir,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmptyDir {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeMount {
    pub name: String,
    #[serde(rename = "mountPath")]
    pub mount_path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    pub image: String,
    pub command: Vec<String>,
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    pub resources: ResourceRequirements,
    #[serde(rename = "securityContext", default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    #[serde(rename = "volumeMounts", default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
}

/// Kubernetes `SecurityContext`, as far as a job needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityContext {
    pub privileged: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

/// Kubernetes `ResourceRequirements`: quantities by resource name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRequirements {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
}

impl Default for ResourceRequirements {
    /// 4 CPUs and 8 GiB, requested and the limit: the local deployer's control plane and
    /// conformance's parallel ginkgo processes share the pod.
    fn default() -> Self {
        let quantities = BTreeMap::from([("cpu".to_owned(), "4".to_owned()), ("memory".to_owned(), "8Gi".to_owned())]);
        ResourceRequirements { requests: quantities.clone(), limits: quantities }
    }
}

/// The command of every job's test container; [`harness_args`] are its arguments.
pub const HARNESS_COMMAND: &str = "harness";

/// One periodic per cell of `config`, sorted by name.
pub fn prow_jobs(config: &ProvidersConfig, opts: &ProwOptions) -> ProwConfig {
    let shared = shared_dashboards(config);
    let cells = match &opts.kubernetes_ref {
        Some(branch) => branch_cells(cells(config), branch),
        None => cells(config),
    };
    let mut periodics: Vec<Periodic> = cells.iter().map(|cell| periodic(config, cell, opts, &shared)).collect();
    periodics.sort_by(|a, b| a.name.cmp(&b.name));
    let postsubmits = if opts.postsubmits { postsubmits(config, opts, &shared) } else { BTreeMap::new() };
    ProwConfig { periodics, postsubmits }
}

/// `cell`'s job name without its `k8s-<minor>` suffix (`ci-cloud-provider-aws-`).
fn job_stem<'a>(cell: &'a Cell<'_>) -> Option<&'a str> {
    cell.name.strip_suffix(&format!("k8s-{}", cell.kubernetes.minor_line()))
}

/// Per provider and job, the cell of the newest minor; no certification job (they certify releases).
fn newest_minor_cells<'a>(cells: Vec<Cell<'a>>) -> Vec<Cell<'a>> {
    let mut newest: BTreeMap<(String, String), Cell<'a>> = BTreeMap::new();
    for cell in cells.into_iter().filter(|cell| !cell.job.certification) {
        let Some(stem) = job_stem(&cell) else { continue };
        let key = (cell.provider.name.clone(), stem.to_owned());
        let newer = newest.get(&key).is_none_or(|kept| {
            (cell.kubernetes.major, cell.kubernetes.minor) > (kept.kubernetes.major, kept.kubernetes.minor)
        });
        if newer {
            newest.insert(key, cell);
        }
    }
    newest.into_values().collect()
}

/// The cells of a job testing kubernetes/kubernetes at `branch`: [`newest_minor_cells`], renamed
/// `…-k8s-<branch>` (`ci-cloud-provider-aws-k8s-master`).
fn branch_cells<'a>(cells: Vec<Cell<'a>>, branch: &str) -> Vec<Cell<'a>> {
    let renamed = |cell: Cell<'a>| {
        let name = format!("{}k8s-{branch}", job_stem(&cell).expect("newest_minor_cells keeps named cells"));
        Cell { name, ..cell }
    };
    newest_minor_cells(cells).into_iter().map(renamed).collect()
}

/// The prefix of a postsubmit's name, in place of the periodics' `ci-`.
pub const POSTSUBMIT_PREFIX: &str = "post-";

/// One postsubmit per provider on GitHub and job, of its newest minor, by repository.
fn postsubmits(
    config: &ProvidersConfig,
    opts: &ProwOptions,
    shared: &BTreeSet<String>,
) -> BTreeMap<String, Vec<Postsubmit>> {
    let mut by_repo: BTreeMap<String, Vec<Postsubmit>> = BTreeMap::new();
    for cell in newest_minor_cells(cells(config)) {
        let Ok(repo) = cell.provider.repo.parse::<RepoRef>() else { continue };
        let job = postsubmit(config, &cell, &repo, opts, shared);
        by_repo.entry(repo.to_string()).or_default().push(job);
    }
    for jobs in by_repo.values_mut() {
        jobs.sort_by(|a, b| a.name.cmp(&b.name));
    }
    by_repo
}

fn postsubmit(
    config: &ProvidersConfig,
    cell: &Cell<'_>,
    repo: &RepoRef,
    opts: &ProwOptions,
    shared: &BTreeSet<String>,
) -> Postsubmit {
    let mut job = periodic(config, cell, opts, shared).job;
    if *repo == opts.repo {
        // The pushed repository is the harness's own (`local`): the job starts in that checkout.
        job.extra_refs.retain(|refs| !refs.workdir);
    }
    let name = format!("{POSTSUBMIT_PREFIX}{}", cell.name.strip_prefix("ci-").unwrap_or(&cell.name));
    job.annotations.insert("testgrid-tab-name".to_owned(), format!("{POSTSUBMIT_PREFIX}{}", tab_name(cell, shared)));
    job.annotations.insert("description".to_owned(), described(cell, &format!("at each push to {repo}")));
    // Prow clones the pushed repository at $GOPATH/src/github.com/<org>/<repo> (no path alias).
    let checkout = format!("{PROW_GOPATH}/src/github.com/{}/{}", repo.org, repo.repo);
    let args = &mut job.spec.containers[0].args;
    args.extend(["--provider-dir".to_owned(), checkout]);
    args.extend(["--provider-version".to_owned(), "$(PULL_BASE_SHA)".to_owned()]);
    // RE2 and Rust's regex escape alike: branch names may hold `.`.
    Postsubmit { name, branches: vec![format!("^{}$", regex::escape(&cell.provider.branch))], job }
}

/// [`prow_jobs`] as the YAML file Prow's `--job-config-path` reads, with a header saying where it
/// came from.
pub fn prow_yaml(config: &ProvidersConfig, opts: &ProwOptions) -> String {
    let body = prow_jobs(config, opts).to_yaml();
    format!(
        "# Prow jobs of the cloud-provider-harness matrix, one periodic per provider × Kubernetes \
         release line × job.\n# Generated by `harness prow-config` from {}; regenerate rather than \
         edit.\n{body}",
        config.source.display()
    )
}

/// `harness run` for `cell`, with Prow's variables: what a job's container runs after
/// [`HARNESS_COMMAND`]. `run_timeout` is [`Timeouts::run`].
pub fn harness_args(cell: &Cell<'_>, opts: &ProwOptions, run_timeout: Duration) -> Vec<String> {
    let mut args = vec!["run".to_owned()];
    let image_file = opts.skip_cloning.then(|| IMAGE_PROVIDERS_FILE.to_owned());
    if let Some(path) = opts.config_path.clone().or(image_file) {
        args.extend(["--config".to_owned(), path]);
    }
    args.extend(["--provider".to_owned(), cell.provider.name.clone()]);
    match &opts.kubernetes_ref {
        Some(_) => {
            args.extend(["--kubernetes-source".to_owned(), format!("{PROW_GOPATH}/src/{KUBERNETES_PATH_ALIAS}")])
        }
        None => args.extend(["--kubernetes".to_owned(), cell.kubernetes.to_string()]),
    }
    args.extend([
        "--suites".to_owned(),
        cell.suites().join(","),
        "--job".to_owned(),
        "$(JOB_NAME)".to_owned(),
        "--build-id".to_owned(),
        "$(BUILD_ID)".to_owned(),
        "--artifacts".to_owned(),
        "$(ARTIFACTS)".to_owned(),
        "--timeout".to_owned(),
        format_duration(run_timeout),
    ]);
    args
}

/// How long a job may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `harness run --timeout`: CCM build, cluster up, CCM deploy and the suites together.
    pub run: Duration,
    /// Prow's `decoration_config.timeout`: [`Timeouts::run`] and [`TEARDOWN_SLACK`] for bringing the
    /// cluster down and publishing.
    pub prow: Duration,
}

impl Timeouts {
    /// `cell`'s suites, its provider's CCM build and deploy, and [`RUN_SLACK`], rounded up to a
    /// minute, for `harness run`; [`TEARDOWN_SLACK`] more for Prow.
    pub fn for_cell(config: &ProvidersConfig, cell: &Cell<'_>) -> Timeouts {
        let suites: Duration = cell.suites().iter().filter_map(|name| config.suite(name)).map(|s| s.timeout).sum();
        let build = cell.provider.ccm.build.timeout();
        let run = suites + build + cell.provider.ccm.deploy.timeout() + RUN_SLACK;
        let run = Duration::from_secs(run.as_secs().div_ceil(60) * 60);
        Timeouts { run, prow: run + TEARDOWN_SLACK }
    }

    /// Prow's timeout given: `harness run` gets [`TEARDOWN_SLACK`] less (half, if it is that short).
    pub fn from_prow(prow: Duration) -> Timeouts {
        Timeouts { run: prow.saturating_sub(TEARDOWN_SLACK).max(prow / 2), prow }
    }

    /// [`ProwOptions::timeout`] if given, else [`Timeouts::for_cell`].
    pub fn of(config: &ProvidersConfig, cell: &Cell<'_>, opts: &ProwOptions) -> Timeouts {
        opts.timeout.map_or_else(|| Timeouts::for_cell(config, cell), Timeouts::from_prow)
    }
}

/// The TestGrid tab of `cell`: its job name without `ci-cloud-provider-`, and without the provider's
/// name too when the provider's dashboard is its own (`shared`: dashboards of several providers).
pub fn tab_name(cell: &Cell<'_>, shared: &BTreeSet<String>) -> String {
    let Some(rest) = cell.name.strip_prefix(JOB_PREFIX) else { return cell.name.clone() };
    if shared.contains(&cell.provider.testgrid.dashboard) {
        return rest.to_owned();
    }
    rest.strip_prefix(&cell.provider.name).and_then(|r| r.strip_prefix('-')).unwrap_or(rest).to_owned()
}

/// The dashboards more than one provider's jobs are on.
fn shared_dashboards(config: &ProvidersConfig) -> BTreeSet<String> {
    let mut providers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for provider in &config.providers {
        providers.entry(provider.testgrid.dashboard.as_str()).or_default().insert(provider.name.as_str());
    }
    providers.into_iter().filter(|(_, names)| names.len() > 1).map(|(dashboard, _)| dashboard.to_owned()).collect()
}

fn periodic(config: &ProvidersConfig, cell: &Cell<'_>, opts: &ProwOptions, shared: &BTreeSet<String>) -> Periodic {
    let timeouts = Timeouts::of(config, cell, opts);
    let nested = needs_privileges(cell);
    let mut env = opts.env.clone();
    let nested_state =
        nested.then(|| env.entry(STATE_DIR_VAR.to_owned()).or_insert_with(|| NESTED_STATE_DIR.to_owned()).clone());
    Periodic {
        name: cell.name.clone(),
        interval: format_duration(cell.interval()),
        job: JobBase {
            cluster: opts.cluster.clone(),
            decorate: true,
            decoration_config: DecorationConfig {
                timeout: format_duration(timeouts.prow),
                skip_cloning: opts.skip_cloning.then_some(true),
                more: opts.decoration.clone(),
            },
            extra_refs: extra_refs(opts),
            labels: opts.labels.clone(),
            annotations: annotations(cell, opts, shared),
            spec: PodSpec {
                containers: vec![Container {
                    image: opts.image.clone(),
                    command: vec![HARNESS_COMMAND.to_owned()],
                    args: harness_args(cell, opts, timeouts.run),
                    env: env.iter().map(|(name, value)| EnvVar { name: name.clone(), value: value.clone() }).collect(),
                    resources: opts.resources.clone(),
                    security_context: nested.then_some(SecurityContext { privileged: true }),
                    volume_mounts: nested_state
                        .map(|dir| VolumeMount { name: NESTED_STATE_VOLUME.into(), mount_path: dir })
                        .into_iter()
                        .collect(),
                }],
                volumes: nested
                    .then(|| Volume { name: NESTED_STATE_VOLUME.into(), empty_dir: EmptyDir {} })
                    .into_iter()
                    .collect(),
            },
        },
    }
}

/// The harness repository, where the job starts, and kubernetes/kubernetes when a job tests a
/// branch; none when nothing is cloned.
fn extra_refs(opts: &ProwOptions) -> Vec<Refs> {
    if opts.skip_cloning {
        return Vec::new();
    }
    let harness = Refs {
        org: opts.repo.org.clone(),
        repo: opts.repo.repo.clone(),
        base_ref: opts.base_ref.clone(),
        path_alias: opts.path_alias.clone(),
        workdir: true,
        clone_uri: opts.clone_uri.clone(),
    };
    let kubernetes = opts.kubernetes_ref.as_ref().map(|branch| Refs {
        org: "kubernetes".into(),
        repo: "kubernetes".into(),
        base_ref: branch.clone(),
        path_alias: Some(KUBERNETES_PATH_ALIAS.into()),
        workdir: false,
        clone_uri: None,
    });
    std::iter::once(harness).chain(kubernetes).collect()
}

/// Where a cell on real nodes keeps its clusters (`HARNESS_STATE_DIR`): an `emptyDir`, as kind
/// gives its nodes' `/var` a volume, since the nested containerd's overlay snapshots cannot sit on
/// the container's own overlay root. Not under `/var/lib`, `/var/log` or `/run`, which each nested
/// node mounts its own over.
pub const NESTED_STATE_DIR: &str = "/var/tmp/cloud-provider-harness";
const STATE_DIR_VAR: &str = "HARNESS_STATE_DIR";
const NESTED_STATE_VOLUME: &str = "harness-state";

/// Whether the cell's cluster has real nodes: each is a kubelet, containerd and runc in network and
/// mount namespaces of its own, with cgroups and mounts the harness makes, which an unprivileged
/// container may not (kind's jobs on Prow are privileged for the same reason).
fn needs_privileges(cell: &Cell<'_>) -> bool {
    matches!(cell.provider.deployer, Deployer::Local { node_kind: crate::nodes::NodeKind::Real, .. })
}

fn annotations(cell: &Cell<'_>, opts: &ProwOptions, shared: &BTreeSet<String>) -> BTreeMap<String, String> {
    let testgrid = &cell.provider.testgrid;
    let mut annotations = BTreeMap::from([
        ("description".to_owned(), description(cell)),
        ("testgrid-dashboards".to_owned(), cell.testgrid_dashboard()),
        ("testgrid-tab-name".to_owned(), tab_name(cell, shared)),
    ]);
    // 0 leaves it to TestGrid's default, as the TestGrid config generator does.
    if testgrid.num_failures_to_alert > 0 {
        annotations.insert("testgrid-num-failures-to-alert".to_owned(), testgrid.num_failures_to_alert.to_string());
    }
    if let Some(email) = opts.alert_email.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        annotations.insert("testgrid-alert-email".to_owned(), email.to_owned());
    }
    annotations
}

fn description(cell: &Cell<'_>) -> String {
    described(cell, &format!("every {}", format_duration(cell.interval())))
}

/// What a job of `cell` runs, and `when`.
fn described(cell: &Cell<'_>, when: &str) -> String {
    format!(
        "cloud-provider-harness: suites {} of provider {} on Kubernetes {}, {when}",
        cell.suites().join(", "),
        cell.provider.name,
        cell.kubernetes,
    )
}
