//! Every rule `cncf/k8s-conformance`'s submission checks (kubernetes-sigs/verify-conformance)
//! apply to a pull request, applied to a directory, offline. Each [`Check`] is named after the
//! scenario it mirrors; a few go further than the bot where its rule is the instructions' but not
//! its code (the `e2e.log` summary, a run that skipped tests), and say so.
//!
//! The directory is either the submission's own folder (`.../v1.37/<product>/`, its parent named
//! after the release) or a folder holding `v1.37/<product>/...` (a clone of the repository with
//! only the submission, or the run's `k8s-conformance/` artifacts folder). The files' paths are
//! taken relative to where `vX.Y/` sits, as the pull request would list them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use crate::conformance_list::{self, ConformanceTest, Minor};
use crate::product::{self, HTML_FIELDS, LOGO_CONTENT_TYPES, REQUIRED_FIELDS};
use crate::{e2e_log, junit_report};

/// The four files of a submission.
pub const FILES: [&str; 4] = ["README.md", "PRODUCT.yaml", "e2e.log", "junit_01.xml"];
/// How many minors before the current stable one still qualify.
pub const SUPPORTED_BEFORE_STABLE: u32 = 2;
/// How many missing tests a failed check lists by name.
const LISTED: usize = 20;

static RELEASE_FOLDER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^v1\.[0-9]{2}$").expect("valid"));
static FOLDER_STRUCTURE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^(v1\.[0-9]{2})/(.+)$").expect("valid"));
static TITLE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^(.*) (v1\.[0-9]{2})[ /](.*)$").expect("valid"));

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail(String),
    /// Not applied, and why (the URLs are fetched only when asked).
    NotChecked(String),
}

/// One rule applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub outcome: Outcome,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Outcome::Pass => write!(f, "PASS  {}", self.name),
            Outcome::Fail(reason) => write!(f, "FAIL  {}: {reason}", self.name),
            Outcome::NotChecked(why) => write!(f, "SKIP  {}: {why}", self.name),
        }
    }
}

/// What the rules need besides the directory.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The release's conformance list (`e2e.test --list-conformance-tests`).
    pub conformance_list: Vec<ConformanceTest>,
    /// The current stable minor: a submission must be for it or one of the two before it.
    pub stable: Minor,
    /// The pull request's title; `None` checks the title the submission would be opened with.
    pub title: Option<String>,
    /// The content type each URL field answered with, when they were fetched.
    pub content_types: Option<BTreeMap<String, String>>,
}

/// All checks of one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `vX.Y` and the product folder, when the layout gives them.
    pub release: Option<String>,
    pub product: Option<String>,
    pub checks: Vec<Check>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        !self.checks.iter().any(|c| matches!(c.outcome, Outcome::Fail(_)))
    }

    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| matches!(c.outcome, Outcome::Fail(_)))
    }

    /// `Conformance results for vX.Y/<product>`: the pull request title the rules ask for.
    pub fn title(&self) -> Option<String> {
        Some(title_for(self.release.as_deref()?, self.product.as_deref()?))
    }
}

/// The pull request title of a submission.
pub fn title_for(release: &str, product: &str) -> String {
    format!("Conformance results for {release}/{product}")
}

/// A file of the submission: its path as the pull request lists it, and where it is.
#[derive(Debug, Clone)]
struct File {
    path: String,
    on_disk: PathBuf,
}

impl File {
    fn base_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    fn dir(&self) -> &str {
        self.path.rsplit_once('/').map_or(".", |(dir, _)| dir)
    }
}

/// Applies every rule to `dir`. An I/O error reading the directory itself is the only error;
/// every problem with what is in it is a failed check.
pub fn verify(dir: &Path, inputs: &Inputs) -> std::io::Result<Verdict> {
    Ok(verify_layout(&Layout::read(dir)?, inputs))
}

/// The files of a submission directory, as the pull request would list them, and the release and
/// product its folders name. Reading it is cheap (no file is opened): read it first to pick the
/// release's conformance list, then [`verify_layout`].
#[derive(Debug, Clone)]
pub struct Layout {
    files: Vec<File>,
    pub release: Option<String>,
    pub product: Option<String>,
}

impl Layout {
    pub fn read(dir: &Path) -> std::io::Result<Layout> {
        let files = submission_files(dir)?;
        let (release, product) = release_and_product(&files);
        Ok(Layout { files, release, product })
    }

    /// Where the file of this base name is (case-insensitive, as the checks find files).
    pub fn file(&self, name: &str) -> Option<&Path> {
        find(&self.files, name).map(|f| f.on_disk.as_path())
    }
}

/// [`verify`] of a directory already read.
pub fn verify_layout(layout: &Layout, inputs: &Inputs) -> Verdict {
    let (files, release, product) = (layout.files.as_slice(), layout.release.clone(), layout.product.clone());
    let mut checks = Vec::new();
    let mut check = |name: &'static str, outcome: Outcome| checks.push(Check { name, outcome });

    check("submission contains all required files", required_files(files));
    check("submission only contains required files", only_required_files(files));
    check("submission has files in structure of releaseversion/productname/", folder_structure(files));
    check("submission is only one product", one_product(files));
    let title = inputs.title.clone().or_else(|| Some(title_for(release.as_deref()?, product.as_deref()?)));
    check(
        "title of product submission contains Kubernetes release version and product name",
        title_shape(title.as_deref()),
    );
    check(
        "submission release version in title matches release version in folder structure",
        title_release(title.as_deref(), release.as_deref()),
    );
    let minor = release.as_deref().and_then(|r| r.parse::<Minor>().ok());
    check("the submission release version is a supported version of Kubernetes", supported(minor, inputs.stable));

    let product_yaml = find(files, "PRODUCT.yaml").map(|f| fs::read_to_string(&f.on_disk));
    let fields = match product_yaml {
        Some(Ok(text)) => product_fields(&text),
        Some(Err(e)) => Err(format!("cannot read PRODUCT.yaml: {e}")),
        None => Err("there is no PRODUCT.yaml".into()),
    };
    check(
        "the PRODUCT.yaml metadata contains all required fields",
        fields.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), required_fields),
    );
    check(
        "the URL and email fields in the PRODUCT.yaml are valid",
        fields.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), field_formats),
    );
    check(
        "the type field in PRODUCT.yaml is valid",
        fields.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), product_type),
    );
    check(
        "the URL fields in the PRODUCT.yaml resolve to their specified data types",
        fields.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), |f| content_types(f, inputs.content_types.as_ref())),
    );

    let log =
        find(files, "e2e.log").map(|f| fs::File::open(&f.on_disk).and_then(|file| e2e_log::scan(BufReader::new(file))));
    let log = match log {
        Some(Ok(log)) => Ok(log),
        Some(Err(e)) => Err(format!("cannot read e2e.log: {e}")),
        None => Err("there is no e2e.log".into()),
    };
    check(
        "the e2e.log output contains the Kubernetes release version",
        log.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), |l| log_version(l, minor)),
    );
    check(
        "the e2e.log output ends with ginkgo's summary of a run with no failure",
        log.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), log_summary),
    );

    let junit = match find(files, "junit_01.xml").map(|f| fs::read_to_string(&f.on_disk)) {
        Some(Ok(text)) => junit_report::read(&text).map_err(|e| format!("junit_01.xml {e}")),
        Some(Err(e)) => Err(format!("cannot read junit_01.xml: {e}")),
        None => Err("there is no junit_01.xml".into()),
    };
    check(
        "junit_01.xml is the file e2e.test writes with --report-dir",
        junit.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), junit_root),
    );
    check(
        "the run skipped nothing: no skip, label filter or dry run",
        junit.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), certification_grade),
    );
    let required = minor.map(|m| conformance_list::required(&inputs.conformance_list, m));
    check(
        "all required conformance tests in the junit_01.xml are present",
        match (&junit, &required) {
            (Err(e), _) => Outcome::Fail(e.clone()),
            (_, None) => Outcome::Fail("the release is unknown, so are the tests it requires".into()),
            (Ok(junit), Some(required)) => tests_present(junit, required),
        },
    );
    check("all tests pass", junit.as_ref().map_or_else(|e| Outcome::Fail(e.clone()), tests_pass));

    Verdict { release, product, checks }
}

/// Every file under `dir`, with the path the pull request would give it.
fn submission_files(dir: &Path) -> std::io::Result<Vec<File>> {
    let mut files = Vec::new();
    let prefix = match (dir.parent().and_then(Path::file_name), dir.file_name()) {
        // `dir` is `vX.Y/<product>` itself.
        (Some(release), Some(product)) if RELEASE_FOLDER.is_match(&release.to_string_lossy()) => {
            format!("{}/{}/", release.to_string_lossy(), product.to_string_lossy())
        }
        _ => String::new(),
    };
    collect(dir, &prefix, &mut files)?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn collect(dir: &Path, prefix: &str, files: &mut Vec<File>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = format!("{prefix}{name}");
        if entry.file_type()?.is_dir() {
            collect(&entry.path(), &format!("{path}/"), files)?;
        } else {
            files.push(File { path, on_disk: entry.path() });
        }
    }
    Ok(())
}

/// The release and product of the first file under `vX.Y/<product>/` (as the checks take them).
fn release_and_product(files: &[File]) -> (Option<String>, Option<String>) {
    for file in files {
        if let Some(found) = FOLDER_STRUCTURE.captures(file.dir()) {
            let product = found[2].split('/').next().unwrap_or_default().to_owned();
            return (Some(found[1].to_owned()), Some(product));
        }
    }
    (None, None)
}

fn find<'a>(files: &'a [File], name: &str) -> Option<&'a File> {
    files.iter().find(|f| f.base_name().eq_ignore_ascii_case(name))
}

fn required_files(files: &[File]) -> Outcome {
    let mut problems = Vec::new();
    for name in FILES {
        match find(files, name) {
            None => problems.push(format!("missing file '{name}'")),
            Some(file) if fs::metadata(&file.on_disk).map(|m| m.len()).unwrap_or(0) == 0 => {
                problems.push(format!("file '{name}' is empty"))
            }
            Some(_) => {}
        }
    }
    fail_if_any(problems)
}

fn only_required_files(files: &[File]) -> Outcome {
    let others: Vec<&str> = files.iter().map(File::base_name).filter(|name| !FILES.contains(name)).collect();
    if others.is_empty() {
        return Outcome::Pass;
    }
    Outcome::Fail(format!(
        "{} file(s) other than {} are in the submission: {}",
        others.len(),
        FILES.join(", "),
        others.join(", ")
    ))
}

fn folder_structure(files: &[File]) -> Outcome {
    if files.is_empty() {
        return Outcome::Fail("the directory holds no files".into());
    }
    match files.iter().find(|f| !FOLDER_STRUCTURE.is_match(f.dir())) {
        Some(file) => Outcome::Fail(format!(
            "file '{}' is not in a folder [KubernetesReleaseVersion]/[ProductName], e.g. v1.37/averycooldistro",
            file.path
        )),
        None => Outcome::Pass,
    }
}

fn one_product(files: &[File]) -> Outcome {
    let folders: BTreeSet<&str> = files.iter().map(File::dir).collect();
    if folders.len() <= 1 {
        return Outcome::Pass;
    }
    let list: Vec<&str> = folders.into_iter().collect();
    Outcome::Fail(format!("the files are in {} folders, one product per submission: {}", list.len(), list.join(", ")))
}

fn title_shape(title: Option<&str>) -> Outcome {
    match title {
        None => Outcome::Fail("no title: the folders give no release and product to make one".into()),
        Some(title) if TITLE.is_match(title) => Outcome::Pass,
        Some(title) => Outcome::Fail(format!(
            "title '{title}' must read 'Conformance results for [KubernetesReleaseVersion]/[ProductName]'"
        )),
    }
}

fn title_release(title: Option<&str>, release: Option<&str>) -> Outcome {
    let in_title = title.and_then(|t| TITLE.captures(t)).map(|c| c[2].to_owned());
    if in_title.is_some() && in_title.as_deref() == release {
        return Outcome::Pass;
    }
    Outcome::Fail(format!(
        "the Kubernetes release in the title ({}) and in the folders ({}) differ",
        in_title.as_deref().unwrap_or("none"),
        release.unwrap_or("none")
    ))
}

fn supported(release: Option<Minor>, stable: Minor) -> Outcome {
    let Some(release) = release else {
        return Outcome::Fail("the folders name no Kubernetes release".into());
    };
    let oldest = stable.minus(SUPPORTED_BEFORE_STABLE);
    if release > stable {
        Outcome::Fail(format!("{release} is newer than the current stable release ({stable})"))
    } else if release < oldest {
        Outcome::Fail(format!(
            "{release} is older than the oldest release still accepted ({oldest}, for stable {stable})"
        ))
    } else {
        Outcome::Pass
    }
}

/// PRODUCT.yaml's fields, every value a string.
fn product_fields(text: &str) -> Result<BTreeMap<String, String>, String> {
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| format!("PRODUCT.yaml is not YAML: {e}"))?;
    let serde_yaml_ng::Value::Mapping(map) = value else {
        return Err("PRODUCT.yaml is not a mapping of fields".into());
    };
    let mut fields = BTreeMap::new();
    let mut not_strings = Vec::new();
    for (key, value) in map {
        let key = key.as_str().map(str::to_owned).unwrap_or_else(|| format!("{key:?}"));
        match value {
            serde_yaml_ng::Value::String(text) => {
                fields.insert(key, text);
            }
            serde_yaml_ng::Value::Null => {}
            other => {
                not_strings.push(format!("`{key}` is {} ({}), not a string: quote it", kind(&other), scalar(&other)))
            }
        }
    }
    if not_strings.is_empty() {
        Ok(fields)
    } else {
        Err(format!("PRODUCT.yaml cannot be read as fields of strings: {}", not_strings.join("; ")))
    }
}

fn kind(value: &serde_yaml_ng::Value) -> &'static str {
    match value {
        serde_yaml_ng::Value::Bool(_) => "a boolean",
        serde_yaml_ng::Value::Number(n) if n.is_f64() => "a float",
        serde_yaml_ng::Value::Number(_) => "an integer",
        serde_yaml_ng::Value::Sequence(_) => "a list",
        serde_yaml_ng::Value::Mapping(_) => "a mapping",
        _ => "not a string",
    }
}

fn scalar(value: &serde_yaml_ng::Value) -> String {
    serde_yaml_ng::to_string(value).map(|s| s.trim().to_owned()).unwrap_or_default()
}

fn required_fields(fields: &BTreeMap<String, String>) -> Outcome {
    let missing: Vec<&str> =
        REQUIRED_FIELDS.into_iter().filter(|field| fields.get(*field).is_none_or(|v| v.trim().is_empty())).collect();
    if missing.is_empty() {
        Outcome::Pass
    } else {
        Outcome::Fail(format!("missing or empty field(s): {}", missing.join(", ")))
    }
}

fn field_formats(fields: &BTreeMap<String, String>) -> Outcome {
    let mut problems = Vec::new();
    for field in product::URL_FIELDS.into_iter().chain(["contact_email_address"]) {
        let Some(value) = fields.get(field).filter(|v| !v.is_empty()) else { continue };
        if let Err(reason) = product::check_field(field, value) {
            problems.push(format!("{field}: {reason}"));
        }
    }
    fail_if_any(problems)
}

fn product_type(fields: &BTreeMap<String, String>) -> Outcome {
    match fields.get("type") {
        None => Outcome::Fail("there is no `type`".into()),
        Some(value) => product::check_type(value).map_or_else(Outcome::Fail, |()| Outcome::Pass),
    }
}

fn content_types(fields: &BTreeMap<String, String>, fetched: Option<&BTreeMap<String, String>>) -> Outcome {
    let Some(fetched) = fetched else {
        return Outcome::NotChecked("the URLs were not fetched (run with --check-urls)".into());
    };
    let mut problems = Vec::new();
    let mut expect = |field: &str, accepted: &[&str]| {
        if !fields.contains_key(field) {
            return;
        }
        let got = fetched.get(field).map(String::as_str).unwrap_or("nothing");
        if !accepted.iter().any(|want| got.contains(want)) {
            problems.push(format!("{field} answered with content type '{got}', not {}", accepted.join(" or ")));
        }
    };
    for field in HTML_FIELDS {
        expect(field, &["text/html"]);
    }
    expect("product_logo_url", &LOGO_CONTENT_TYPES);
    fail_if_any(problems)
}

fn log_version(log: &e2e_log::E2eLog, release: Option<Minor>) -> Outcome {
    match (&log.version, log.minor()) {
        (None, _) => Outcome::Fail(
            "no line 'e2e test version: vX.Y.Z': e2e.log must be ginkgo's verbose output (ginkgo -v)".into(),
        ),
        (Some(version), found) if found != release => Outcome::Fail(format!(
            "e2e.log is of e2e test version {version}, the folders say {}",
            release.map_or("nothing".into(), |r| r.to_string())
        )),
        _ => Outcome::Pass,
    }
}

fn log_summary(log: &e2e_log::E2eLog) -> Outcome {
    match log.summary {
        None => {
            Outcome::Fail("no 'Ran N of M Specs' and 'SUCCESS! -- N Passed | ...' lines: the run did not finish".into())
        }
        Some(s) if !s.success || s.failed > 0 => {
            Outcome::Fail(format!("ginkgo's summary says {} passed, {} failed of {} run", s.passed, s.failed, s.ran))
        }
        Some(_) => Outcome::Pass,
    }
}

fn junit_root(junit: &junit_report::E2eJunit) -> Outcome {
    if junit.root == "testsuites" {
        Outcome::Pass
    } else {
        Outcome::Fail(format!(
            "the root element is <{}>, not <testsuites>: submit the junit_01.xml e2e.test writes into its --report-dir",
            junit.root
        ))
    }
}

/// Not in the bot's code, but the instructions': a certification run focuses `[Conformance]`
/// and skips nothing. ginkgo records its filters in the suite's properties.
fn certification_grade(junit: &junit_report::E2eJunit) -> Outcome {
    let mut problems = Vec::new();
    for (property, what) in [("SkipStrings", "skip"), ("LabelFilter", "label filter"), ("SkipFiles", "skip-file")] {
        if let Some(value) = junit.property(property).filter(|v| !v.is_empty() && *v != "[]") {
            problems.push(format!("the run had a {what} ({property} = {value})"));
        }
    }
    if junit.property("DryRun") == Some("true") {
        problems.push("the run was a dry run (DryRun = true)".into());
    }
    fail_if_any(problems)
}

fn conformance_cases(junit: &junit_report::E2eJunit) -> impl Iterator<Item = &junit_report::Case> {
    junit.cases.iter().filter(|c| !c.skipped && c.name.contains("[Conformance]"))
}

fn tests_present(junit: &junit_report::E2eJunit, required: &[&str]) -> Outcome {
    let passed: BTreeSet<String> =
        conformance_cases(junit).filter(|c| !c.failed).map(|c| junit_report::list_name(&c.name)).collect();
    let missing: Vec<&str> = required.iter().copied().filter(|name| !passed.contains(*name)).collect();
    if missing.is_empty() {
        return Outcome::Pass;
    }
    let mut listed: Vec<String> = missing.iter().take(LISTED).map(|name| format!("\n    - {name}")).collect();
    if missing.len() > LISTED {
        listed.push(format!("\n    ... and {} more", missing.len() - LISTED));
    }
    Outcome::Fail(format!(
        "{} of the {} required test(s) are missing, skipped or failed:{}",
        missing.len(),
        required.len(),
        listed.concat()
    ))
}

fn tests_pass(junit: &junit_report::E2eJunit) -> Outcome {
    let failed: Vec<String> =
        conformance_cases(junit).filter(|c| c.failed || c.errored).map(|c| format!("\n    - {}", c.name)).collect();
    if failed.is_empty() {
        Outcome::Pass
    } else {
        Outcome::Fail(format!("{} test(s) failed:{}", failed.len(), failed.concat()))
    }
}

fn fail_if_any(problems: Vec<String>) -> Outcome {
    if problems.is_empty() { Outcome::Pass } else { Outcome::Fail(problems.join("; ")) }
}
