//! From the raw shape of `providers.yaml` to [`ProvidersConfig`]: every check of meaning, every
//! default. All problems are collected, each with the path of the node at fault, which
//! [`super::locate`] turns into a line and column.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::clouds::{self, CloudFacts};
use super::locate::{Location, YamlPath};
use super::raw::{
    RawBuild, RawCertification, RawDeploy, RawDeployer, RawFile, RawHook, RawKnownFailure, RawLoadBalancerServices,
    RawProvider, RawSuite, RawTestGrid, RawTestMatcher,
};
use super::template::{self, Placeholder, TemplateError};
use super::{
    BUILTIN_SUITES, BuildOutput, CERTIFIED_CONFORMANCE, Capability, Ccm, CcmBuild, CcmDeploy, CommandSpec, Deployer,
    DeployerKind, Hook, Hooks, JobSpec, KnownFailure, KubernetesVersion, LoadBalancerServices, Provider,
    ProviderTestGrid, ProvidersConfig, Required, Suite, SuiteKind, TestGridSettings, TestMatcher,
    UPSTREAM_LOAD_BALANCERS, UPSTREAM_LOAD_BALANCERS_PARALLEL, VsphereTags, jobs,
};

pub const DEFAULT_NODES: u32 = 3;
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(6 * 3600);
pub const DEFAULT_NUM_FAILURES_TO_ALERT: u16 = 3;
pub const DEFAULT_BUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);
pub const DEFAULT_DEPLOY_TIMEOUT: Duration = Duration::from_secs(5 * 60);
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(2 * 60);
/// The most `flake_attempts` a suite may give.
pub const MAX_FLAKE_ATTEMPTS: u32 = 5;
pub const DEFAULT_SUITE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// One problem of the file, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// e.g. `providers[0].capabilities[2]`.
    pub path: String,
    pub location: Option<Location>,
    pub problem: Problem,
}

impl Diagnostic {
    pub(super) fn new(text: &str, at: YamlPath, problem: Problem) -> Self {
        Diagnostic { path: at.to_string(), location: at.locate(text), problem }
    }

    /// `file:line:column: path: problem`, one line per problem.
    pub fn render(&self, file: &Path) -> String {
        let location = self.location.map(|l| format!(":{l}")).unwrap_or_default();
        format!("{}{location}: {}: {}", file.display(), self.path, self.problem)
    }

    pub(super) fn render_all(file: &Path, problems: &[Diagnostic]) -> String {
        problems.iter().map(|d| d.render(file)).collect::<Vec<_>>().join("\n")
    }
}

/// What is wrong, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("unknown capability `{name}`; the capabilities are: {valid}")]
    UnknownCapability { name: String, valid: String },
    #[error("capability `{0}` is listed twice; list it once")]
    DuplicateCapability(String),
    #[error(
        "capability `{capability}` needs `hooks.{hook}`: cloud-e2e uses it to {purpose}; add the hook or drop the capability"
    )]
    CapabilityNeedsHook { capability: Capability, hook: &'static str, purpose: &'static str },
    #[error("unknown {what} `{name}`; use one of: {valid}")]
    UnknownKind { what: &'static str, name: String, valid: String },
    #[error("`{option}` is not an option of {what}; its options are: {allowed}")]
    OptionNotAllowed { option: &'static str, what: String, allowed: String },
    #[error("{what} needs `{option}`")]
    MissingOption { option: &'static str, what: String },
    #[error("{what} takes `{first}` or `{second}`, not both; keep one")]
    ConflictingOptions { what: String, first: &'static str, second: &'static str },
    #[error("provider `{name}` is already defined{first}; give each provider its own name")]
    DuplicateProvider { name: String, first: AtLine },
    #[error("suite `{name}` is already defined{first}; give each suite its own name")]
    DuplicateSuite { name: String, first: AtLine },
    #[error("suite `{0}` is built in; give yours another name")]
    BuiltinSuiteRedefined(String),
    #[error("unknown suite `{name}`; the suites are: {known} (define more under the top-level `suites:`)")]
    UnknownSuite { name: String, known: String },
    #[error("suite `{0}` is listed twice; list it once")]
    DuplicateSuiteReference(String),
    #[error("required suite `{0}` is not run by any job of this provider; add it to `suites` (or to a job's `suites`)")]
    RequiredSuiteNotRun(String),
    #[error(
        "suite `{suite}` is not run by this provider (it runs {runs}); name one of those, or leave `suite` out to match any"
    )]
    KnownFailureSuiteNotRun { suite: String, runs: String },
    #[error("{0}")]
    BadVersion(String),
    #[error(
        "Kubernetes {version} is on release line {line} like {other}: jobs are per release line, so list one version per minor"
    )]
    SameReleaseLine { version: String, other: String, line: String },
    #[error("`{value}` is not a duration{reason}: write it like 90s, 20m, 2h or 1h30m")]
    BadDuration { value: String, reason: &'static str },
    #[error("`{pattern}` is not a valid regular expression: {error}")]
    BadRegex { pattern: String, error: String },
    #[error(
        "{what} `{name}` is not valid: use lower-case letters, digits and `-`, starting with a letter and not ending with `-`"
    )]
    BadName { what: &'static str, name: String },
    #[error("`{bin}` is not a CCM the toolchain builds; use one of: {valid}")]
    UnknownToolchainCcm { bin: String, valid: String },
    #[error("`{value}` is not a valid {what}: {reason}")]
    BadValue { what: &'static str, value: String, reason: &'static str },
    #[error(
        "hooks.{0} does not say which instance: put the `{{node}}` placeholder in its command, \
         e.g. [..., instance, terminate, \"{{node}}\"]"
    )]
    HookWithoutNode(&'static str),
    #[error("cloud `{cloud}` has no {kind} nodes: {why}; use `node_kind: {other}` with it, or another cloud")]
    NodeKindNotOnCloud { cloud: &'static str, kind: &'static str, why: &'static str, other: &'static str },
    #[error("capability `{0}` is both declared in `capabilities` and listed as unsupported; keep one")]
    DeclaredAndUnsupported(String),
    #[error("`{key}` describes the tagged inventory of {clouds}; drop it, or set `cloud: {first}`")]
    OnlyWithTaggedInventory { key: &'static str, clouds: String, first: &'static str },
    #[error(
        "a region tag needs zone tags: the vSphere CCM reads zone and region labels together; \
         give `zones`, or drop `region`"
    )]
    RegionWithoutZones,
    #[error(
        "capability `zones` needs zone tags in the vcsim inventory, and `deployer.zones` is empty: \
         list the zones (one host each), or drop the capability"
    )]
    ZonesWithoutTags,
    #[error(
        "--nodes {nodes}: vcsim's inventory has {hosts} host(s) (one per zone) of 4 GiB, each holding \
         {per_host} node VMs of 1 GiB, so at most {max} nodes; add zones or use fewer nodes"
    )]
    InventoryTooSmall { nodes: u32, hosts: u32, per_host: u32, max: u32 },
    #[error("{0}")]
    Template(#[from] TemplateError),
    #[error("placeholder {placeholder} cannot be used here: {reason}")]
    PlaceholderNotHere { placeholder: Placeholder, reason: &'static str },
    #[error("the command is empty: give at least the program to run, e.g. [make, ccm]")]
    EmptyCommand,
    #[error("{what} is empty: {hint}")]
    EmptyList { what: &'static str, hint: &'static str },
    #[error(
        "the `local` deployer's nodes are simulated and run no pods, so a CCM deployed by `{0}` never starts; \
         deploy it with `kind: process`"
    )]
    LocalNeedsProcess(&'static str),
    #[error(
        "a `process` deploy runs the binary the build produces, and this build produces a manifest; \
         deploy with `kind: manifest`, or build a `binary:`"
    )]
    ProcessNeedsBinary,
    #[error(
        "a `manifest` deploy without `path` applies the manifest the build produces, and this build produces a binary; \
         give `path`, or build a `manifest:`"
    )]
    ManifestNeedsManifest,
    #[error("`nodes: {nodes}` is out of range: a local cluster has 1 to {max} nodes")]
    NodesOutOfRange { nodes: u32, max: u32 },
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    #[error("certification `{field}` {reason}")]
    BadCertification { field: &'static str, reason: String },
    #[error(
        "suite `certified-conformance` writes a submission for the provider's product, and this provider has no \
         `certification:` block; add one (vendor, name, version, website_url, documentation_url, type, description, \
         contact_email_address: docs/providers.md)"
    )]
    CertificationMissing,
    #[error(
        "suite `certified-conformance` runs in a job of its own, which the `certification:` block adds on every \
         Kubernetes release line (`{job}`): remove it here"
    )]
    CertificationSuiteListed { job: String },
    #[error(
        "this job has no `name`, so it is the provider's default job (`{job}`), and the job{first} already is: \
         name one of them"
    )]
    SecondDefaultJob { job: String, first: AtLine },
    #[error("job name `{job}` is {len} characters; Prow wants at most 63: shorten the provider (or job) name")]
    JobNameTooLong { job: String, len: usize },
    #[error(
        "job `{job}` clashes with job `{other}`{first}: Prow and TestGrid need job names unique, even reduced to \
         letters and digits; rename the provider or the job"
    )]
    JobNameClash { job: String, other: String, first: AtLine },
}

/// ` (line N)` when the earlier definition was located; for "already defined" messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtLine(pub Option<usize>);

impl fmt::Display for AtLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(line) => write!(f, " at line {line}"),
            None => Ok(()),
        }
    }
}

/// A regex error on one line: the syntax errors' last line says what is wrong (the others draw the
/// pattern with a caret, which the message already shows).
fn regex_error(error: &regex::Error) -> String {
    let text = error.to_string();
    let last = text.lines().map(str::trim).rfind(|line| !line.is_empty()).unwrap_or_default();
    last.strip_prefix("error: ").unwrap_or(last).to_owned()
}

/// Parses a Go-style duration: `90s`, `20m`, `2h`, `1h30m`, `500ms`. Zero is refused.
pub fn parse_duration(text: &str) -> Result<Duration, &'static str> {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(" (it is empty)");
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err("");
        }
        let number: u64 = rest[..digits].parse().map_err(|_| " (the number is too large)")?;
        rest = &rest[digits..];
        let (unit, millis) = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
            .into_iter()
            .find(|(unit, _)| rest.starts_with(unit) && !(*unit == "m" && rest.starts_with("ms")))
            .ok_or(" (each number needs a unit: ms, s, m or h)")?;
        rest = &rest[unit.len()..];
        let part = number.checked_mul(millis).ok_or(" (it is too long)")?;
        total = total.checked_add(Duration::from_millis(part)).ok_or(" (it is too long)")?;
    }
    if total.is_zero() {
        return Err(" (it must be longer than zero)");
    }
    Ok(total)
}

/// A duration the way Go (and so Prow's `interval`) writes it: `6h`, `1h30m`, `90s` → `1m30s`.
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        return "0s".to_owned();
    }
    let (hours, minutes, seconds, rest) = (millis / 3_600_000, millis / 60_000 % 60, millis / 1000 % 60, millis % 1000);
    let mut out = String::new();
    for (value, unit) in [(hours, "h"), (minutes, "m"), (seconds, "s"), (rest, "ms")] {
        if value > 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    out
}

type Problems = Vec<(YamlPath, Problem)>;

/// Checks `raw` (read from `text`) and builds the config, or returns every problem.
pub(super) fn validate(raw: RawFile, text: &str, source: &Path) -> Result<ProvidersConfig, Problems> {
    let mut check = Checker { text, problems: Vec::new() };
    let root = YamlPath::root();
    let testgrid = check.testgrid(raw.testgrid, &root.key("testgrid"));
    let suites = check.suites(raw.suites, &root.key("suites"));
    let mut providers = Vec::new();
    let mut first_name: HashMap<String, YamlPath> = HashMap::new();
    for (i, raw_provider) in raw.providers.into_iter().enumerate() {
        let at = root.key("providers").index(i);
        let name_at = at.key("name");
        let duplicate = first_name.get(&raw_provider.name).cloned();
        if let Some(first) = &duplicate {
            let first = check.line_of(first);
            check.report(&name_at, Problem::DuplicateProvider { name: raw_provider.name.clone(), first });
        } else {
            first_name.insert(raw_provider.name.clone(), name_at);
        }
        // A duplicate is still checked, but left out of the job names (its clash is reported).
        if let Some(provider) = check.provider(raw_provider, &at, &suites)
            && duplicate.is_none()
        {
            providers.push((at, provider));
        }
    }
    if providers.is_empty() && first_name.is_empty() {
        check.report(
            &root.key("providers"),
            Problem::EmptyList { what: "providers", hint: "define at least one provider (see docs/providers.md)" },
        );
    }
    check.job_names(&providers);
    match (testgrid, check.problems.is_empty()) {
        (Some(testgrid), true) => Ok(ProvidersConfig {
            source: source.to_path_buf(),
            testgrid,
            suites,
            providers: providers.into_iter().map(|(_, p)| p).collect(),
        }),
        _ => Err(check.problems),
    }
}

/// Where a `{placeholder}` is being used, to tell which ones make sense.
#[derive(Debug, Clone, Copy)]
struct Context {
    /// `None` for the top-level suites, used by providers of any deployer.
    deployer: Option<DeployerKind>,
    instance_hook: bool,
    process_deploy: bool,
    binary_build: bool,
}

impl Context {
    fn suite() -> Self {
        Context { deployer: None, instance_hook: false, process_deploy: false, binary_build: true }
    }

    fn provider(deployer: Option<DeployerKind>, binary_build: bool) -> Self {
        Context { deployer, instance_hook: false, process_deploy: false, binary_build }
    }

    fn not_here(self, placeholder: Placeholder) -> Option<&'static str> {
        match placeholder {
            Placeholder::Node if !self.instance_hook => {
                Some("it names the instance of a terminate/shutdown/start hook, and is only known there")
            }
            Placeholder::SecurePort if !self.process_deploy => Some("it is only known to a `process` deploy's args"),
            Placeholder::CcmBinary if !self.binary_build => Some("this provider's CCM build produces no binary"),
            p if p.local_deployer_only() && self.deployer.is_some_and(|d| d != DeployerKind::Local) => {
                Some("only the `local` deployer provides it")
            }
            _ => None,
        }
    }
}

struct Checker<'t> {
    text: &'t str,
    problems: Problems,
}

impl Checker<'_> {
    fn report(&mut self, at: &YamlPath, problem: Problem) {
        self.problems.push((at.clone(), problem));
    }

    fn line_of(&self, at: &YamlPath) -> AtLine {
        AtLine(at.locate(self.text).map(|l| l.line))
    }

    fn testgrid(&mut self, raw: RawTestGrid, at: &YamlPath) -> Option<TestGridSettings> {
        let bucket = raw.gcs_bucket.trim().strip_prefix("gs://").unwrap_or(raw.gcs_bucket.trim()).trim_end_matches('/');
        let valid_chars = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c);
        let reason = if bucket.contains("://") {
            Some("TestGrid reads GCS only: give the bucket's name, or gs://<name>")
        } else if bucket.contains('/') {
            Some("give only the bucket: jobs go under <bucket>/logs/<job>")
        } else if !(3..=222).contains(&bucket.len())
            || !bucket.chars().all(valid_chars)
            || !bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
            || !bucket.ends_with(|c: char| c.is_ascii_alphanumeric())
        {
            Some("bucket names are 3-222 lower-case letters, digits, `-`, `_` and `.`")
        } else {
            None
        };
        if let Some(reason) = reason {
            self.report(&at.key("gcs_bucket"), Problem::BadValue { what: "GCS bucket", value: raw.gcs_bucket, reason });
            return None;
        }
        if let Some(group) = &raw.dashboard_group
            && !group.chars().any(|c| c.is_ascii_alphanumeric())
        {
            let reason = "TestGrid names need a letter or digit";
            self.report(
                &at.key("dashboard_group"),
                Problem::BadValue { what: "dashboard group", value: group.clone(), reason },
            );
        }
        Some(TestGridSettings { gcs_bucket: bucket.to_owned(), dashboard_group: raw.dashboard_group })
    }

    fn suites(&mut self, raw: Vec<RawSuite>, at: &YamlPath) -> Vec<Suite> {
        let mut suites = Suite::builtins();
        let mut first: HashMap<String, YamlPath> = HashMap::new();
        for (i, raw_suite) in raw.into_iter().enumerate() {
            let at = at.index(i);
            let name_at = at.key("name");
            if BUILTIN_SUITES.contains(&raw_suite.name.as_str()) {
                self.report(&name_at, Problem::BuiltinSuiteRedefined(raw_suite.name.clone()));
                continue;
            }
            if let Some(first) = first.get(&raw_suite.name) {
                let first = self.line_of(first);
                self.report(&name_at, Problem::DuplicateSuite { name: raw_suite.name.clone(), first });
                continue;
            }
            first.insert(raw_suite.name.clone(), name_at);
            if let Some(suite) = self.suite(raw_suite, &at) {
                suites.push(suite);
            }
        }
        suites
    }

    fn suite(&mut self, raw: RawSuite, at: &YamlPath) -> Option<Suite> {
        let named = self.name(&at.key("name"), "suite name", &raw.name);
        let what = |kind: &str| format!("a `{kind}` suite");
        let options = [
            ("focus", raw.focus.is_some()),
            ("skip", raw.skip.is_some()),
            ("parallel", raw.parallel.is_some()),
            ("args", raw.args.is_some()),
            ("command", raw.command.is_some()),
            ("env", raw.env.is_some()),
            ("dir", raw.dir.is_some()),
            ("timeout", raw.timeout.is_some()),
            ("flake_attempts", raw.flake_attempts.is_some()),
        ];
        let timeout = self.duration(&at.key("timeout"), raw.timeout.as_deref(), DEFAULT_SUITE_TIMEOUT);
        let flake_attempts = self.flake_attempts(&at.key("flake_attempts"), raw.flake_attempts);
        let kind = match raw.kind.as_str() {
            "cloud-e2e" => {
                self.only(at, &what("cloud-e2e"), &options, &["focus", "skip", "timeout", "flake_attempts"]);
                SuiteKind::CloudE2e {
                    focus: self.regex(&at.key("focus"), raw.focus),
                    skip: self.regex(&at.key("skip"), raw.skip),
                }
            }
            "ginkgo" => {
                self.only(
                    at,
                    &what("ginkgo"),
                    &options,
                    &["focus", "skip", "parallel", "args", "timeout", "flake_attempts"],
                );
                if raw.parallel == Some(0) {
                    self.report(&at.key("parallel"), Problem::Zero("parallel"));
                }
                let args = raw.args.unwrap_or_default();
                self.templates(&at.key("args"), &args, Context::suite());
                SuiteKind::Ginkgo {
                    focus: self.regex(&at.key("focus"), raw.focus),
                    skip: self.regex(&at.key("skip"), raw.skip),
                    parallel: raw.parallel.unwrap_or(1).max(1),
                    args,
                }
            }
            UPSTREAM_LOAD_BALANCERS => {
                self.only(
                    at,
                    &what(UPSTREAM_LOAD_BALANCERS),
                    &options,
                    &["skip", "parallel", "timeout", "flake_attempts"],
                );
                if raw.parallel == Some(0) {
                    self.report(&at.key("parallel"), Problem::Zero("parallel"));
                }
                SuiteKind::UpstreamLoadBalancers {
                    skip: self.regex(&at.key("skip"), raw.skip),
                    parallel: raw.parallel.unwrap_or(UPSTREAM_LOAD_BALANCERS_PARALLEL).max(1),
                }
            }
            "exec" => {
                self.only(at, &what("exec"), &options, &["command", "args", "env", "dir", "timeout"]);
                let command =
                    self.command(at, &what("exec"), raw.command, raw.args, raw.env, raw.dir, Context::suite())?;
                SuiteKind::Exec { command }
            }
            other => {
                self.unknown_kind(at, "suite kind", other, &SuiteKind::NAMES);
                return None;
            }
        };
        named.then_some(Suite { name: raw.name, builtin: false, kind, timeout, flake_attempts })
    }

    /// A suite's `flake_attempts`: 1 (no retry) unless given; at most [`MAX_FLAKE_ATTEMPTS`].
    fn flake_attempts(&mut self, at: &YamlPath, value: Option<u32>) -> u32 {
        match value {
            None => 1,
            Some(0) => {
                self.report(at, Problem::Zero("flake_attempts"));
                1
            }
            Some(n) if n > MAX_FLAKE_ATTEMPTS => {
                let reason = "at most 5: more attempts turn a failing test into a pass by persistence";
                self.report(at, Problem::BadValue { what: "number of flake attempts", value: n.to_string(), reason });
                MAX_FLAKE_ATTEMPTS
            }
            Some(n) => n,
        }
    }

    fn provider(&mut self, raw: RawProvider, at: &YamlPath, suites: &[Suite]) -> Option<Provider> {
        let named = self.name(&at.key("name"), "provider name", &raw.name);
        let repo = self.plain(&at.key("repo"), "repository", raw.repo);
        let branch = self.plain(&at.key("branch"), "branch", raw.branch);
        let release_branches = self.release_branches(raw.branches.unwrap_or_default(), &branch, &at.key("branches"));
        let prow = self.prow(raw.prow, &at.key("prow"));
        let deployer = self.deployer(raw.deployer, &at.key("deployer"));
        let kubernetes = self.versions(raw.kubernetes, &at.key("kubernetes"));
        // `None` when the deployer is invalid (reported): placeholders are then not second-guessed.
        let deployer_kind = deployer.as_ref().map(Deployer::kind);
        let ccm = self.ccm(raw.ccm, &at.key("ccm"), deployer_kind);
        let binary_build = ccm.as_ref().is_none_or(|ccm| ccm.build.produces_binary());
        let hooks = self.hooks(raw.hooks, &at.key("hooks"), Context::provider(deployer_kind, binary_build));
        let capabilities = self.capabilities(raw.capabilities, &at.key("capabilities"), &hooks);
        let unsupported = self.unsupported(raw.unsupported, &at.key("unsupported"), &capabilities);
        if let Some(Deployer::Local { tags: Some(tags), .. }) = &deployer
            && tags.zones.is_empty()
            && capabilities.contains(&Capability::Zones)
        {
            self.report(&at.key("deployer").key("zones"), Problem::ZonesWithoutTags);
        }

        let known: BTreeSet<&str> = suites.iter().map(|s| s.name.as_str()).collect();
        let provider_suites = self.suite_names(raw.suites, &at.key("suites"), &known);
        if provider_suites.is_empty() {
            let hint = "list the suites a run executes, e.g. [cloud-e2e, conformance-quick]";
            self.report(&at.key("suites"), Problem::EmptyList { what: "suites", hint });
        }
        let interval = self.duration(&at.key("interval"), raw.interval.as_deref(), DEFAULT_INTERVAL);
        let listed_jobs = raw.jobs.is_some();
        let mut jobs = match raw.jobs {
            None => vec![JobSpec { name: None, suites: provider_suites.clone(), interval, certification: false }],
            Some(raw_jobs) => self.jobs(raw_jobs, &at.key("jobs"), &known, interval),
        };
        let run: BTreeSet<&str> = jobs.iter().flat_map(|j| &j.suites).map(String::as_str).collect();
        let required_at = at.key("required");
        let required_suites = match raw.required.suites {
            None => provider_suites.clone(),
            Some(names) => {
                let names = self.suite_names(names, &required_at.key("suites"), &known);
                for (i, name) in names.iter().enumerate() {
                    if !run.contains(name.as_str()) {
                        self.report(&required_at.key("suites").index(i), Problem::RequiredSuiteNotRun(name.clone()));
                    }
                }
                names
            }
        };
        let tests = raw
            .required
            .tests
            .into_iter()
            .enumerate()
            .filter_map(|(i, matcher)| self.test_matcher(&required_at.key("tests").index(i), matcher))
            .collect();
        let dashboard = raw.testgrid.dashboard.unwrap_or_else(|| format!("cloud-provider-{}", raw.name));
        if !dashboard.chars().any(|c| c.is_ascii_alphanumeric()) {
            let reason = "TestGrid names need a letter or digit";
            let at = at.key("testgrid").key("dashboard");
            self.report(&at, Problem::BadValue { what: "dashboard name", value: dashboard.clone(), reason });
        }
        let testgrid = ProviderTestGrid {
            dashboard,
            num_failures_to_alert: raw.testgrid.num_failures_to_alert.unwrap_or(DEFAULT_NUM_FAILURES_TO_ALERT),
        };
        let required = Required { suites: required_suites, tests };
        let flake_runs = raw.flake.runs.unwrap_or(1);
        if flake_runs == 0 {
            let reason = "a commit needs at least one run; 1 counts the first failure";
            let at = at.key("flake").key("runs");
            self.report(&at, Problem::BadValue { what: "flake runs", value: "0".into(), reason });
        }
        let load_balancer_services =
            self.load_balancer_services(raw.load_balancer_services, &at.key("load_balancer_services"));
        let known_failures = self.known_failures(raw.known_failures, &at.key("known_failures"), &run);
        let has_certification = raw.certification.is_some();
        self.certified_suite_listed(&provider_suites, &at.key("suites"), has_certification, &raw.name);
        // The one job of a provider without `jobs:` runs `suites`, reported above.
        for (j, job) in jobs.iter().enumerate().filter(|_| listed_jobs) {
            let at = at.key("jobs").index(j).key("suites");
            self.certified_suite_listed(&job.suites, &at, has_certification, &raw.name);
        }
        let certification = raw.certification.and_then(|raw| self.certification(raw, &at.key("certification")));
        if has_certification {
            jobs.push(JobSpec::certification());
        }
        let (deployer, ccm) = (deployer?, ccm?);
        named.then_some(Provider {
            name: raw.name,
            repo,
            branch,
            release_branches,
            prow,
            kubernetes,
            ccm,
            deployer,
            capabilities,
            unsupported,
            suites: provider_suites,
            required,
            hooks,
            load_balancer_services,
            flake_runs: flake_runs.max(1),
            known_failures,
            jobs,
            testgrid,
            certification,
        })
    }

    /// `certified-conformance` in a provider's `suites` or a job's: without a `certification:`
    /// block it has no product to certify; with one, it already has its own job.
    fn certified_suite_listed(&mut self, suites: &[String], at: &YamlPath, has_certification: bool, provider: &str) {
        let Some(i) = suites.iter().position(|s| s == crate::CERTIFIED_CONFORMANCE) else { return };
        let problem = if has_certification {
            let job = format!("{}{provider}-{}-k8s-<minor>", jobs::JOB_PREFIX, crate::CERTIFICATION_JOB);
            Problem::CertificationSuiteListed { job }
        } else {
            Problem::CertificationMissing
        };
        self.report(&at.index(i), problem);
    }

    /// The `certification:` block: `PRODUCT.yaml`'s checks on each value without placeholders
    /// (one with `{provider_version}` or `{kubernetes_version}` is checked once filled in).
    fn certification(&mut self, raw: RawCertification, at: &YamlPath) -> Option<certification::Product> {
        let product = certification::Product {
            vendor: raw.vendor,
            name: raw.name,
            version: raw.version,
            website_url: raw.website_url,
            repo_url: raw.repo_url,
            documentation_url: raw.documentation_url,
            product_logo_url: raw.product_logo_url,
            product_type: raw.product_type,
            description: raw.description,
            contact_email_address: raw.contact_email_address,
        };
        let before = self.problems.len();
        for (field, value) in product.fields() {
            let Some(value) = value else { continue };
            let field_at = at.key(field);
            match template::placeholders(value) {
                Err(error) => self.report(&field_at, Problem::Template(error)),
                Ok(used) if used.is_empty() => {
                    if let Err(reason) = certification::product::check_field(field, value) {
                        self.report(&field_at, Problem::BadCertification { field, reason });
                    }
                }
                Ok(used) => {
                    for placeholder in used {
                        if !matches!(placeholder, Placeholder::ProviderVersion | Placeholder::KubernetesVersion) {
                            let reason = "PRODUCT.yaml takes only {provider_version} and {kubernetes_version}";
                            self.report(&field_at, Problem::PlaceholderNotHere { placeholder, reason });
                        }
                    }
                }
            }
        }
        (self.problems.len() == before).then_some(product)
    }

    /// Any release or pre-release tag: one the harness does not embed is pinned from the Go
    /// module proxy when a run first needs it (`toolchain::resolve_or_pin`), and refused then,
    /// before anything starts, if the proxy does not serve it.
    fn versions(&mut self, raw: Vec<String>, at: &YamlPath) -> Vec<KubernetesVersion> {
        if raw.is_empty() {
            let hint = "list the Kubernetes versions to test, newest first, e.g. [v1.37.1, v1.36.4]";
            self.report(at, Problem::EmptyList { what: "kubernetes", hint });
        }
        let mut versions: Vec<KubernetesVersion> = Vec::new();
        for (i, text) in raw.iter().enumerate() {
            let at = at.index(i);
            let version = match text.parse::<KubernetesVersion>() {
                Ok(version) => version,
                Err(message) => {
                    self.report(&at, Problem::BadVersion(message));
                    continue;
                }
            };
            if let Some(other) = versions.iter().find(|v| v.minor_line() == version.minor_line()) {
                let problem = Problem::SameReleaseLine {
                    version: version.to_string(),
                    other: other.to_string(),
                    line: version.minor_line(),
                };
                self.report(&at, problem);
                continue;
            }
            versions.push(version);
        }
        versions
    }

    fn deployer(&mut self, raw: RawDeployer, at: &YamlPath) -> Option<Deployer> {
        let options = [
            ("nodes", raw.nodes.is_some()),
            ("cloud", raw.cloud.is_some()),
            ("node_kind", raw.node_kind.is_some()),
            ("zones", raw.zones.is_some()),
            ("region", raw.region.is_some()),
            ("kubeconfig", raw.kubeconfig.is_some()),
            ("config", raw.config.is_some()),
            ("image", raw.image.is_some()),
            ("deployer", raw.deployer.is_some()),
            ("args", raw.args.is_some()),
        ];
        let what = |kind: &str| format!("the `{kind}` deployer");
        let deployer = match raw.kind.as_str() {
            "local" => {
                self.only(at, &what("local"), &options, &["nodes", "cloud", "node_kind", "zones", "region"]);
                let cloud = match raw.cloud.as_deref() {
                    None => clouds::default_cloud(),
                    Some(name) => clouds::named(name).unwrap_or_else(|| {
                        self.unknown_value(&at.key("cloud"), "local cloud", name, &clouds::names());
                        clouds::default_cloud()
                    }),
                };
                let nodes = raw.nodes.unwrap_or(DEFAULT_NODES);
                let node_kind = self.node_kind(raw.node_kind.as_deref(), cloud, at);
                let tags = self.vsphere_tags(raw.zones, raw.region, cloud, at);
                let max = match &tags {
                    Some(tags) => tags.max_nodes().min(cloud.max_nodes(node_kind)),
                    None => cloud.max_nodes(node_kind),
                };
                match &tags {
                    Some(tags) if nodes > max => {
                        let problem = Problem::InventoryTooSmall {
                            nodes,
                            hosts: tags.hosts(),
                            per_host: crate::nodes::VCSIM_VMS_PER_HOST,
                            max,
                        };
                        self.report(&at.key("nodes"), problem);
                    }
                    _ if !(1..=max).contains(&nodes) => {
                        self.report(&at.key("nodes"), Problem::NodesOutOfRange { nodes, max })
                    }
                    _ => {}
                }
                Deployer::Local { nodes, cloud, node_kind, tags }
            }
            "existing" => {
                self.only(at, &what("existing"), &options, &["kubeconfig"]);
                Deployer::Existing { kubeconfig: raw.kubeconfig.map(PathBuf::from) }
            }
            "kind" => {
                self.only(at, &what("kind"), &options, &["config", "image"]);
                let context = Context::provider(Some(DeployerKind::Kind), true);
                if let Some(image) = &raw.image {
                    self.template(&at.key("image"), image, context);
                }
                Deployer::Kind { config: raw.config.map(PathBuf::from), image: raw.image }
            }
            "kubetest2" => {
                self.only(at, &what("kubetest2"), &options, &["deployer", "args"]);
                let args = raw.args.unwrap_or_default();
                self.templates(&at.key("args"), &args, Context::provider(Some(DeployerKind::Kubetest2), true));
                let deployer = self.required(at, &what("kubetest2"), "deployer", raw.deployer)?;
                if !self.name(&at.key("deployer"), "kubetest2 deployer", &deployer) {
                    return None;
                }
                Deployer::Kubetest2 { deployer, args }
            }
            other => {
                let valid = DeployerKind::ALL.map(DeployerKind::as_str);
                self.unknown_kind(at, "deployer", other, &valid);
                return None;
            }
        };
        Some(deployer)
    }

    fn ccm(&mut self, raw: super::raw::RawCcm, at: &YamlPath, deployer: Option<DeployerKind>) -> Option<Ccm> {
        let build = self.build(raw.build, &at.key("build"), deployer);
        let deploy = self.deploy(raw.deploy, &at.key("deploy"), deployer, build.as_ref());
        Some(Ccm { build: build?, deploy: deploy? })
    }

    fn build(&mut self, raw: RawBuild, at: &YamlPath, deployer: Option<DeployerKind>) -> Option<CcmBuild> {
        let options = [
            ("package", raw.package.is_some()),
            ("bin", raw.bin.is_some()),
            ("command", raw.command.is_some()),
            ("args", raw.args.is_some()),
            ("env", raw.env.is_some()),
            ("dir", raw.dir.is_some()),
            ("binary", raw.binary.is_some()),
            ("manifest", raw.manifest.is_some()),
            ("timeout", raw.timeout.is_some()),
        ];
        let timeout = self.duration(&at.key("timeout"), raw.timeout.as_deref(), DEFAULT_BUILD_TIMEOUT);
        match raw.kind.as_str() {
            "cargo" => {
                let what = "a `cargo` build";
                self.only(at, what, &options, &["package", "bin", "timeout"]);
                let package = self.required(at, what, "package", raw.package);
                let bin = self.required(at, what, "bin", raw.bin);
                Some(CcmBuild::Cargo { package: package?, bin: bin?, timeout })
            }
            "command" => {
                let what = "a `command` build";
                let allowed = ["command", "args", "env", "dir", "binary", "manifest", "timeout"];
                self.only(at, what, &options, &allowed);
                let output = match (raw.binary, raw.manifest) {
                    (Some(binary), None) => Some(BuildOutput::Binary(binary.into())),
                    (None, Some(manifest)) => Some(BuildOutput::Manifest(manifest.into())),
                    (Some(_), Some(_)) => {
                        let problem =
                            Problem::ConflictingOptions { what: what.to_owned(), first: "binary", second: "manifest" };
                        self.report(&at.key("manifest").the_key(), problem);
                        None
                    }
                    (None, None) => {
                        self.report(at, Problem::MissingOption { option: "binary` or `manifest", what: what.into() });
                        None
                    }
                };
                let binary = matches!(output, Some(BuildOutput::Binary(_)));
                let context = Context::provider(deployer, binary);
                let command = self.command(at, what, raw.command, raw.args, raw.env, raw.dir, context);
                Some(CcmBuild::Command { command: command?, output: output?, timeout })
            }
            "toolchain" => {
                let what = "a `toolchain` build";
                self.only(at, what, &options, &["bin", "timeout"]);
                let bin = self.required(at, what, "bin", raw.bin)?;
                if !crate::pins::BUILDABLE_CCMS.contains(&bin.as_str()) {
                    let valid = crate::pins::BUILDABLE_CCMS.join(", ");
                    let problem = Problem::UnknownToolchainCcm { bin: bin.clone(), valid };
                    self.report(&at.key("bin"), problem);
                    return None;
                }
                Some(CcmBuild::Toolchain { bin, timeout })
            }
            other => {
                self.unknown_kind(at, "CCM build kind", other, &["cargo", "command", "toolchain"]);
                None
            }
        }
    }

    fn deploy(
        &mut self,
        raw: RawDeploy,
        at: &YamlPath,
        deployer: Option<DeployerKind>,
        build: Option<&CcmBuild>,
    ) -> Option<CcmDeploy> {
        let options = [
            ("args", raw.args.is_some()),
            ("env", raw.env.is_some()),
            ("path", raw.path.is_some()),
            ("command", raw.command.is_some()),
            ("dir", raw.dir.is_some()),
            ("timeout", raw.timeout.is_some()),
        ];
        let timeout = self.duration(&at.key("timeout"), raw.timeout.as_deref(), DEFAULT_DEPLOY_TIMEOUT);
        let binary_build = build.is_none_or(CcmBuild::produces_binary);
        let kind_at = at.key("kind");
        match raw.kind.as_str() {
            "process" => {
                self.only(at, "a `process` deploy", &options, &["args", "env", "timeout"]);
                if !binary_build {
                    self.report(&kind_at, Problem::ProcessNeedsBinary);
                }
                let mut context = Context::provider(deployer, binary_build);
                context.process_deploy = true;
                let args = raw.args.unwrap_or_default();
                self.templates(&at.key("args"), &args, context);
                let env = raw.env.unwrap_or_default();
                self.env(&at.key("env"), &env, context);
                Some(CcmDeploy::Process { args, env, timeout })
            }
            "manifest" => {
                self.only(at, "a `manifest` deploy", &options, &["path", "timeout"]);
                if deployer == Some(DeployerKind::Local) {
                    self.report(&kind_at, Problem::LocalNeedsProcess("manifest"));
                }
                if raw.path.is_none() && build.is_some() && binary_build {
                    self.report(&kind_at, Problem::ManifestNeedsManifest);
                }
                Some(CcmDeploy::Manifest { path: raw.path.map(PathBuf::from), timeout })
            }
            "command" => {
                let what = "a `command` deploy";
                self.only(at, what, &options, &["command", "args", "env", "dir", "timeout"]);
                if deployer == Some(DeployerKind::Local) {
                    self.report(&kind_at, Problem::LocalNeedsProcess("command"));
                }
                let context = Context::provider(deployer, binary_build);
                let command = self.command(at, what, raw.command, raw.args, raw.env, raw.dir, context)?;
                Some(CcmDeploy::Command { command, timeout })
            }
            other => {
                self.unknown_kind(at, "CCM deploy kind", other, &["process", "manifest", "command"]);
                None
            }
        }
    }

    fn hooks(&mut self, raw: super::raw::RawHooks, at: &YamlPath, context: Context) -> Hooks {
        let mut hook = |name: &'static str, raw: Option<RawHook>, instance: bool| {
            let raw = raw?;
            let at = at.key(name);
            let context = Context { instance_hook: instance, ..context };
            let uses_node = raw
                .command
                .iter()
                .chain(raw.env.values())
                .any(|arg| template::placeholders(arg).is_ok_and(|used| used.contains(&Placeholder::Node)));
            if instance && !uses_node {
                self.report(&at.key("command"), Problem::HookWithoutNode(name));
            }
            let timeout = self.duration(&at.key("timeout"), raw.timeout.as_deref(), DEFAULT_HOOK_TIMEOUT);
            let command =
                self.command(&at, &format!("hooks.{name}"), Some(raw.command), None, Some(raw.env), None, context)?;
            Some(Hook { command, timeout })
        };
        Hooks {
            terminate_instance: hook("terminate_instance", raw.terminate_instance, true),
            shutdown_instance: hook("shutdown_instance", raw.shutdown_instance, true),
            start_instance: hook("start_instance", raw.start_instance, true),
            list_load_balancers: hook("list_load_balancers", raw.list_load_balancers, false),
            probe_load_balancer: hook("probe_load_balancer", raw.probe_load_balancer, false),
            run_on_cloud_network: hook("run_on_cloud_network", raw.run_on_cloud_network, false),
        }
    }

    fn load_balancer_services(&mut self, raw: RawLoadBalancerServices, at: &YamlPath) -> LoadBalancerServices {
        for (field, annotations) in [("annotations", &raw.annotations), ("udp_annotations", &raw.udp_annotations)] {
            for key in annotations.keys() {
                if let Err(reason) = annotation_key(key) {
                    let at = at.key(field).key(key);
                    self.report(&at, Problem::BadValue { what: "annotation key", value: key.clone(), reason });
                }
            }
        }
        if let Some(class) = &raw.load_balancer_class
            && annotation_key(class).is_err()
        {
            let reason = "a class is a label-style name with a domain prefix, e.g. example.com/internal";
            let at = at.key("load_balancer_class");
            self.report(&at, Problem::BadValue { what: "loadBalancerClass", value: class.clone(), reason });
        }
        LoadBalancerServices {
            annotations: raw.annotations,
            udp_annotations: raw.udp_annotations,
            load_balancer_class: raw.load_balancer_class,
        }
    }

    fn capabilities(&mut self, raw: Vec<String>, at: &YamlPath, hooks: &Hooks) -> BTreeSet<Capability> {
        let mut capabilities = BTreeSet::new();
        for (i, name) in raw.into_iter().enumerate() {
            let at = at.index(i);
            let Ok(capability) = name.parse::<Capability>() else {
                self.report(&at, Problem::UnknownCapability { name, valid: Capability::list() });
                continue;
            };
            if !capabilities.insert(capability) {
                self.report(&at, Problem::DuplicateCapability(name));
                continue;
            }
            let needs: &[(&'static str, bool, &'static str)] = match capability {
                Capability::NodeShutdown => &[
                    ("shutdown_instance", hooks.shutdown_instance.is_some(), "shut an instance down"),
                    ("start_instance", hooks.start_instance.is_some(), "start it again"),
                ],
                Capability::NodeDeletion => {
                    &[("terminate_instance", hooks.terminate_instance.is_some(), "terminate an instance")]
                }
                _ => &[],
            };
            for &(hook, present, purpose) in needs {
                if !present {
                    self.report(&at, Problem::CapabilityNeedsHook { capability, hook, purpose });
                }
            }
        }
        capabilities
    }

    fn suite_names(&mut self, raw: Vec<String>, at: &YamlPath, known: &BTreeSet<&str>) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for (i, name) in raw.into_iter().enumerate() {
            let at = at.index(i);
            if !known.contains(name.as_str()) {
                let known = known.iter().copied().collect::<Vec<_>>().join(", ");
                self.report(&at, Problem::UnknownSuite { name, known });
            } else if names.contains(&name) {
                self.report(&at, Problem::DuplicateSuiteReference(name));
            } else {
                names.push(name);
            }
        }
        names
    }

    fn jobs(
        &mut self,
        raw: Vec<super::raw::RawJob>,
        at: &YamlPath,
        known: &BTreeSet<&str>,
        interval: Duration,
    ) -> Vec<JobSpec> {
        if raw.is_empty() {
            let hint = "leave `jobs` out for one job running every suite, or list the jobs";
            self.report(at, Problem::EmptyList { what: "jobs", hint });
        }
        let mut jobs: Vec<JobSpec> = Vec::new();
        let mut default_job: Option<YamlPath> = None;
        for (i, job) in raw.into_iter().enumerate() {
            let at = at.index(i);
            match (&job.name, &default_job) {
                (Some(name), _) => {
                    self.name(&at.key("name"), "job name", name);
                }
                (None, Some(first)) => {
                    let job = format!("{}<provider>-k8s-<minor>", jobs::JOB_PREFIX);
                    let problem = Problem::SecondDefaultJob { job, first: self.line_of(first) };
                    self.report(&at, problem);
                    // Reported once: not again as a clash of job names.
                    continue;
                }
                (None, None) => default_job = Some(at.clone()),
            }
            let suites = self.suite_names(job.suites, &at.key("suites"), known);
            if suites.is_empty() {
                self.report(&at.key("suites"), Problem::EmptyList { what: "suites", hint: "a job runs some suites" });
            }
            let interval = self.duration(&at.key("interval"), job.interval.as_deref(), interval);
            jobs.push(JobSpec { name: job.name, suites, interval, certification: false });
        }
        jobs
    }

    fn test_matcher(&mut self, at: &YamlPath, raw: RawTestMatcher) -> Option<TestMatcher> {
        match raw {
            RawTestMatcher::Name(name) if name.trim().is_empty() => {
                let reason = "give the test's full name, or `regex: <pattern>`";
                self.report(at, Problem::BadValue { what: "test name", value: name, reason });
                None
            }
            RawTestMatcher::Name(name) => Some(TestMatcher::Name(name)),
            RawTestMatcher::Regex(pattern) => match regex::Regex::new(&pattern) {
                Ok(regex) => Some(TestMatcher::Regex(regex)),
                Err(error) => {
                    self.report(&at.key("regex"), Problem::BadRegex { pattern, error: regex_error(&error) });
                    None
                }
            },
        }
    }

    /// `known_failures:`: each names a test, a reason and an `http(s)` link, and a suite only one
    /// the provider runs.
    fn known_failures(&mut self, raw: Vec<RawKnownFailure>, at: &YamlPath, run: &BTreeSet<&str>) -> Vec<KnownFailure> {
        let mut known = Vec::new();
        for (i, entry) in raw.into_iter().enumerate() {
            let at = at.index(i);
            let test = self.test_matcher(&at.key("test"), entry.test);
            if entry.reason.trim().is_empty() {
                let reason = "say why the test fails and what would fix it";
                self.report(
                    &at.key("reason"),
                    Problem::BadValue { what: "reason", value: entry.reason.clone(), reason },
                );
            }
            if !(entry.link.starts_with("https://") || entry.link.starts_with("http://")) {
                let reason = "give the http(s) address of the issue that tracks the failure";
                self.report(&at.key("link"), Problem::BadValue { what: "link", value: entry.link.clone(), reason });
            }
            if entry.suite.as_deref() == Some(CERTIFIED_CONFORMANCE) {
                let reason = "certification takes every conformance test passing: a known failure cannot excuse one";
                let value = CERTIFIED_CONFORMANCE.to_owned();
                self.report(&at.key("suite"), Problem::BadValue { what: "known failure's suite", value, reason });
            } else if let Some(suite) = &entry.suite
                && !run.contains(suite.as_str())
            {
                let runs = run.iter().copied().collect::<Vec<_>>().join(", ");
                self.report(&at.key("suite"), Problem::KnownFailureSuiteNotRun { suite: suite.clone(), runs });
            }
            if let Some(test) = test {
                known.push(KnownFailure { test, suite: entry.suite, reason: entry.reason, link: entry.link });
            }
        }
        known
    }

    /// Job names: short enough for Prow, unique across the file even as TestGrid normalises them.
    fn job_names(&mut self, providers: &[(YamlPath, Provider)]) {
        let mut seen: HashMap<String, (String, YamlPath)> = HashMap::new();
        for (at, provider) in providers {
            for (j, job) in provider.jobs.iter().enumerate() {
                let job_at = match &job.name {
                    _ if job.certification => at.key("certification"),
                    Some(_) => at.key("jobs").index(j).key("name"),
                    None => at.key("name"),
                };
                for version in &provider.kubernetes {
                    let name = jobs::job_name(&provider.name, job.name.as_deref(), version);
                    if name.len() > jobs::MAX_JOB_NAME {
                        self.report(&job_at, Problem::JobNameTooLong { len: name.len(), job: name });
                        break;
                    }
                    let normalized: String =
                        name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
                    if let Some((other, first)) = seen.get(&normalized) {
                        let problem =
                            Problem::JobNameClash { job: name, other: other.clone(), first: self.line_of(first) };
                        self.report(&job_at, problem);
                        break;
                    }
                    seen.insert(normalized, (name, job_at.clone()));
                }
            }
        }
    }

    // ---- helpers ----

    /// Reports each present option not in `allowed`, at its key.
    fn only(&mut self, at: &YamlPath, what: &str, present: &[(&'static str, bool)], allowed: &[&str]) {
        for &(option, is_present) in present {
            if is_present && !allowed.contains(&option) {
                let allowed = std::iter::once("kind").chain(allowed.iter().copied()).collect::<Vec<_>>().join(", ");
                let problem = Problem::OptionNotAllowed { option, what: what.to_owned(), allowed };
                self.report(&at.key(option).the_key(), problem);
            }
        }
    }

    fn required<T>(&mut self, at: &YamlPath, what: &str, option: &'static str, value: Option<T>) -> Option<T> {
        if value.is_none() {
            self.report(at, Problem::MissingOption { option, what: what.to_owned() });
        }
        value
    }

    fn unknown_kind(&mut self, at: &YamlPath, what: &'static str, name: &str, valid: &[&str]) {
        self.unknown_value(&at.key("kind"), what, name, valid);
    }

    /// The `local` deployer's `node_kind`: `real` or `kwok`, the cloud's default when not given.
    /// Real nodes need the local cloud (their CCM initialises them from its instances).
    fn node_kind(&mut self, value: Option<&str>, cloud: &CloudFacts, at: &YamlPath) -> crate::nodes::NodeKind {
        use crate::nodes::NodeKind;
        let Some(value) = value else { return cloud.default_node_kind() };
        let kinds = [("real", NodeKind::Real), ("kwok", NodeKind::Kwok)];
        let Some((_, kind)) = kinds.iter().find(|(name, _)| *name == value) else {
            self.unknown_value(&at.key("node_kind"), "node kind", value, &kinds.map(|(name, _)| name));
            return cloud.default_node_kind();
        };
        if !cloud.has_node_kind(*kind) {
            let name = |kind: NodeKind| kinds.iter().find(|(_, k)| *k == kind).map_or("", |(name, _)| *name);
            let problem = Problem::NodeKindNotOnCloud {
                cloud: cloud.name,
                kind: name(*kind),
                why: cloud.why_not_other_node_kinds,
                other: name(cloud.default_node_kind()),
            };
            self.report(&at.key("node_kind"), problem);
        }
        *kind
    }

    /// `unsupported`: capability → why the provider lacks it. A capability it declares cannot be
    /// unsupported too.
    fn unsupported(
        &mut self,
        raw: BTreeMap<String, String>,
        at: &YamlPath,
        declared: &BTreeSet<Capability>,
    ) -> BTreeMap<Capability, String> {
        let mut reasons = BTreeMap::new();
        for (name, reason) in raw {
            let at = at.key(&name);
            let Ok(capability) = name.parse::<Capability>() else {
                self.report(&at, Problem::UnknownCapability { name, valid: Capability::list() });
                continue;
            };
            if declared.contains(&capability) {
                self.report(&at, Problem::DeclaredAndUnsupported(name));
                continue;
            }
            if reason.trim().is_empty() {
                let hint = "say why the provider lacks it; cloud-e2e gives the reason with each test it skips";
                self.report(&at, Problem::EmptyList { what: "reason", hint });
                continue;
            }
            reasons.insert(capability, reason.trim().to_owned());
        }
        reasons
    }

    /// The `zones` and `region` of a `local` deployer: vcsim's tags (its defaults when neither is
    /// given), refused with any other cloud.
    fn vsphere_tags(
        &mut self,
        zones: Option<Vec<String>>,
        region: Option<String>,
        cloud: &CloudFacts,
        at: &YamlPath,
    ) -> Option<VsphereTags> {
        if !cloud.tagged_inventory {
            let tagged: Vec<&str> = clouds::CLOUDS.iter().filter(|c| c.tagged_inventory).map(|c| c.name).collect();
            for (key, given) in [("zones", zones.is_some()), ("region", region.is_some())] {
                if given {
                    let clouds = tagged.iter().map(|c| format!("`cloud: {c}`")).collect::<Vec<_>>().join(", ");
                    let first = tagged.first().copied().unwrap_or_default();
                    self.report(&at.key(key), Problem::OnlyWithTaggedInventory { key, clouds, first });
                }
            }
            return None;
        }
        let tags = match (zones, region) {
            (None, None) => VsphereTags::default_tags(),
            (zones, region) => VsphereTags { zones: zones.unwrap_or_default(), region },
        };
        for (i, zone) in tags.zones.iter().enumerate() {
            self.label_value(&at.key("zones").index(i), "zone", zone);
        }
        if let Some(region) = &tags.region {
            self.label_value(&at.key("region"), "region", region);
            if tags.zones.is_empty() {
                self.report(&at.key("region"), Problem::RegionWithoutZones);
            }
        }
        Some(tags)
    }

    /// A tag that becomes a node label's value (`topology.kubernetes.io/zone`): at most 63
    /// letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
    fn label_value(&mut self, at: &YamlPath, what: &'static str, value: &str) {
        let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        let ok = (1..=63).contains(&value.len())
            && ends_ok(value.chars().next())
            && ends_ok(value.chars().last())
            && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok {
            let reason = "it becomes a node label's value: use at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit";
            self.report(at, Problem::BadValue { what, value: value.to_owned(), reason });
        }
    }

    /// `name` at `at` is none of `valid`.
    fn unknown_value(&mut self, at: &YamlPath, what: &'static str, name: &str, valid: &[&str]) {
        let problem = Problem::UnknownKind { what, name: name.to_owned(), valid: valid.join(", ") };
        self.report(at, problem);
    }

    fn name(&mut self, at: &YamlPath, what: &'static str, name: &str) -> bool {
        let ok = name.starts_with(|c: char| c.is_ascii_lowercase())
            && !name.ends_with('-')
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !ok {
            self.report(at, Problem::BadName { what, name: name.to_owned() });
        }
        ok
    }

    /// `branches`: the provider's `branch` (the master line, allowed for clarity) and release
    /// branches `release-MAJOR.MINOR`, each once.
    fn release_branches(&mut self, branches: Vec<String>, default: &str, at: &YamlPath) -> Vec<String> {
        let mut release = Vec::new();
        for (i, branch) in branches.into_iter().enumerate() {
            if branch == default {
                continue;
            }
            if super::release_line_of(&branch).is_none() {
                let reason = "a release line is a release-MAJOR.MINOR branch (or the provider's `branch`)";
                self.report(&at.index(i), Problem::BadValue { what: "branch", value: branch, reason });
            } else if release.contains(&branch) {
                let reason = "listed twice";
                self.report(&at.index(i), Problem::BadValue { what: "branch", value: branch, reason });
            } else {
                release.push(branch);
            }
        }
        release
    }

    /// `prow`: existing job names and the `org/repo` whose commit is the provider's.
    fn prow(&mut self, raw: Option<super::raw::RawProw>, at: &YamlPath) -> super::ProwSource {
        let Some(raw) = raw else { return super::ProwSource::default() };
        let jobs =
            raw.jobs.into_iter().enumerate().map(|(i, job)| self.plain(&at.key("jobs").index(i), "job", job)).collect();
        if let Some(repo) = &raw.repo
            && (repo.split('/').count() != 2 || repo.split('/').any(str::is_empty))
        {
            let reason = "an org/repo as started.json's repos keys name it, e.g. kubernetes/cloud-provider-gcp";
            self.report(&at.key("repo"), Problem::BadValue { what: "repository", value: repo.clone(), reason });
        }
        let repo = raw.repo;
        super::ProwSource { jobs, repo }
    }

    /// A non-empty value without whitespace (repository, branch).
    fn plain(&mut self, at: &YamlPath, what: &'static str, value: String) -> String {
        if value.is_empty() || value.chars().any(char::is_whitespace) {
            let reason = "it must be non-empty, without spaces";
            self.report(at, Problem::BadValue { what, value: value.clone(), reason });
        }
        value
    }

    fn duration(&mut self, at: &YamlPath, text: Option<&str>, default: Duration) -> Duration {
        let Some(text) = text else { return default };
        parse_duration(text).unwrap_or_else(|reason| {
            self.report(at, Problem::BadDuration { value: text.to_owned(), reason });
            default
        })
    }

    fn regex(&mut self, at: &YamlPath, pattern: Option<String>) -> Option<String> {
        let pattern = pattern?;
        if let Err(error) = regex::Regex::new(&pattern) {
            self.report(at, Problem::BadRegex { pattern: pattern.clone(), error: regex_error(&error) });
        }
        Some(pattern)
    }

    #[allow(clippy::too_many_arguments)]
    fn command(
        &mut self,
        at: &YamlPath,
        what: &str,
        command: Option<Vec<String>>,
        args: Option<Vec<String>>,
        env: Option<BTreeMap<String, String>>,
        dir: Option<String>,
        context: Context,
    ) -> Option<CommandSpec> {
        let command = self.required(at, what, "command", command)?;
        if command.is_empty() || command[0].trim().is_empty() {
            self.report(&at.key("command"), Problem::EmptyCommand);
            return None;
        }
        self.templates(&at.key("command"), &command, context);
        let args = args.unwrap_or_default();
        self.templates(&at.key("args"), &args, context);
        let env = env.unwrap_or_default();
        self.env(&at.key("env"), &env, context);
        Some(CommandSpec { argv: command.into_iter().chain(args).collect(), env, dir: dir.map(PathBuf::from) })
    }

    fn env(&mut self, at: &YamlPath, env: &BTreeMap<String, String>, context: Context) {
        for (key, value) in env {
            let valid = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                let reason = "use letters, digits and `_`, not starting with a digit";
                let problem = Problem::BadValue { what: "environment variable name", value: key.clone(), reason };
                self.report(&at.key(key.as_str()).the_key(), problem);
            }
            self.template(&at.key(key.as_str()), value, context);
        }
    }

    fn templates(&mut self, at: &YamlPath, values: &[String], context: Context) {
        for (i, value) in values.iter().enumerate() {
            self.template(&at.index(i), value, context);
        }
    }

    fn template(&mut self, at: &YamlPath, value: &str, context: Context) {
        match template::placeholders(value) {
            Err(error) => self.report(at, Problem::Template(error)),
            Ok(used) => {
                let mut reported = BTreeSet::new();
                for placeholder in used {
                    if let Some(reason) = context.not_here(placeholder)
                        && reported.insert(placeholder)
                    {
                        self.report(at, Problem::PlaceholderNotHere { placeholder, reason });
                    }
                }
            }
        }
    }
}

/// Checks a Kubernetes annotation key (`[prefix/]name`): a DNS subdomain prefix of at most 253
/// characters, and a name of 1 to 63 alphanumerics, `-`, `_` or `.`, starting and ending with an
/// alphanumeric.
fn annotation_key(key: &str) -> Result<(), &'static str> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let alnum_ends = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let name_ok = (1..=63).contains(&name.len())
        && alnum_ends(name)
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(
            "an annotation name is 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
        );
    }
    if let Some(prefix) = prefix {
        let label_ok = |label: &str| {
            (1..=63).contains(&label.len())
                && alnum_ends(label)
                && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if prefix.len() > 253 || !prefix.split('.').all(label_ok) {
            return Err("an annotation prefix is a DNS subdomain: lower-case labels joined by '.', e.g. example.com");
        }
    }
    Ok(())
}
