//! Toolchain pins made at run time, for any Kubernetes release or pre-release tag the Go module
//! proxy serves (`harness toolchain install --kubernetes v1.37.0-rc.1`, and each point of
//! `harness bisect --side kubernetes`).
//!
//! A pin is what `tools/kube/pin.sh` and `tools/local-upstream-ccm/pin.sh` write for the embedded
//! ones: a module requiring `k8s.io/kubernetes@TAG` with every staging module replaced by its
//! published `k8s.io/<x> v0.MINOR.PATCH[-pre]`, the tools and `e2e_imports.go` added, then
//! `go mod tidy`; and `local-upstream-ccm`'s module at the same staging version. They are written
//! to `<cache>/toolchains/pins/<TAG>/{kube,local-upstream-ccm}/` (made in `<TAG>.partial` and
//! renamed into place, so a pin is whole or absent), and the toolchain is then built and cached
//! from them exactly like a pinned release's. The embedded pins stay as they are and win.

use std::cmp::Ordering;
use std::fs;
use std::path::{Path, PathBuf};

use super::pins::GoModule;
use super::{Result, ToolchainError, cache_root, find_go, io_err};

/// The module path of Kubernetes.
pub const KUBERNETES_MODULE: &str = "k8s.io/kubernetes";

/// The folder of the pins made at run time.
pub fn pins_dir() -> PathBuf {
    cache_root().join("toolchains").join("pins")
}

/// A Kubernetes release or pre-release tag: `v1.37.1`, `v1.37.0-rc.1`. Ordered as semver orders
/// them (`alpha` < `beta` < `rc` < the release).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tag {
    pub minor: u32,
    pub patch: u32,
    pub pre: Option<(PreKind, u32)>,
}

/// The pre-release kinds Kubernetes tags, in semver order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PreKind {
    Alpha,
    Beta,
    Rc,
}

impl PreKind {
    pub const ALL: [PreKind; 3] = [PreKind::Alpha, PreKind::Beta, PreKind::Rc];

    fn name(self) -> &'static str {
        match self {
            PreKind::Alpha => "alpha",
            PreKind::Beta => "beta",
            PreKind::Rc => "rc",
        }
    }
}

impl Tag {
    /// Parses `v1.M.P` or `v1.M.P-(alpha|beta|rc).N`; `None` for anything else (pseudo-versions,
    /// branch names, other majors).
    pub fn parse(text: &str) -> Option<Tag> {
        let rest = text.strip_prefix("v1.")?;
        let (numbers, pre) = match rest.split_once('-') {
            Some((numbers, pre)) => (numbers, Some(pre)),
            None => (rest, None),
        };
        let (minor, patch) = numbers.split_once('.')?;
        let number =
            |s: &str| (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten();
        let pre = match pre {
            None => None,
            Some(pre) => {
                let (kind, n) = pre.split_once('.')?;
                let kind = PreKind::ALL.into_iter().find(|k| k.name() == kind)?;
                Some((kind, number(n)?))
            }
        };
        Some(Tag { minor: number(minor)?, patch: number(patch)?, pre })
    }

    /// The version of the staging modules (`k8s.io/api`, …) published with it: `v0.37.0-rc.1`.
    pub fn staging(&self) -> String {
        format!("v0.{}", &self.to_string()[3..])
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v1.{}.{}", self.minor, self.patch)?;
        if let Some((kind, n)) = self.pre {
            write!(f, "-{}.{n}", kind.name())?;
        }
        Ok(())
    }
}

impl Ord for Tag {
    fn cmp(&self, other: &Self) -> Ordering {
        // A release sorts after its own pre-releases.
        let pre = |t: &Tag| t.pre.map_or((1, PreKind::Alpha, 0), |(k, n)| (0, k, n));
        (self.minor, self.patch, pre(self)).cmp(&(other.minor, other.patch, pre(other)))
    }
}

impl PartialOrd for Tag {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `go.mod` of the Kubernetes module of `tag` before `go get`: what `tools/kube/pin.sh` starts
/// from. `upstream` is `k8s.io/kubernetes@tag`'s own go.mod, whose `./staging/` replacements
/// become the published modules at the tag's staging version.
pub fn kube_go_mod(tag: &Tag, upstream: &str) -> String {
    let staging = tag.staging();
    let mut replaced: Vec<&str> = upstream
        .lines()
        .filter_map(|line| {
            let (from, to) = line.trim().trim_start_matches("replace ").split_once(" => ")?;
            let from = from.split_whitespace().next()?;
            (from.starts_with("k8s.io/") && to.trim().starts_with("./staging/")).then_some(from)
        })
        .collect();
    replaced.sort_unstable();
    replaced.dedup();
    let mut text = format!(
        "// Kubernetes {tag}, as built by `harness toolchain install`. Pinned at run time from the Go module proxy.\n\
         module cloud-provider-harness/tools/kube/{tag}\n\ngo 1.26.0\n\nreplace (\n"
    );
    for module in replaced {
        text.push_str(&format!("\t{module} => {module} {staging}\n"));
    }
    text.push_str(")\n");
    text
}

/// The version of `path` that `go_mod` requires.
fn required(go_mod: &str, path: &str) -> Option<String> {
    go_mod.lines().find_map(|line| {
        let mut words = line.trim().trim_start_matches("require").split_whitespace();
        (words.next()? == path).then_some(())?;
        words.next().filter(|v| v.starts_with('v')).map(str::to_owned)
    })
}

/// `e2e_imports.go` (never built: build tag `tools`) importing `packages`, the output of
/// `go list` of `k8s.io/kubernetes/test/e2e`'s import path and test imports; only module
/// packages are kept (a dot in the first element), sorted and deduplicated.
pub fn e2e_imports(tag: &Tag, packages: &str) -> String {
    let mut imports: Vec<&str> = packages
        .lines()
        .map(str::trim)
        .filter(|p| p.split('/').next().is_some_and(|first| first.contains('.')) && p.contains('/'))
        .collect();
    imports.sort_unstable();
    imports.dedup();
    let mut text = format!(
        "// Code generated by harness for Kubernetes {tag}. DO NOT EDIT.\n\n//go:build tools\n\n\
         // Package kube is never built: it names k8s.io/kubernetes/test/e2e and the imports of its tests\n\
         // (what `go test -c` builds into e2e.test), so that `go mod tidy` keeps the modules they need.\n\
         package kube\n\nimport (\n"
    );
    for import in imports {
        text.push_str(&format!("\t_ \"{import}\"\n"));
    }
    text.push_str(")\n");
    text
}

/// The first lines of `local-upstream-ccm`'s `go.mod` for `tag`.
pub fn ccm_go_mod(tag: &Tag) -> String {
    format!(
        "// local-upstream-ccm for Kubernetes {tag}, as built by `harness toolchain install`. Pinned at run time.\n\
         module cloud-provider-harness/tools/local-upstream-ccm\n\ngo 1.26.0\n"
    )
}

/// The staging modules `local-upstream-ccm` requires at the tag's staging version.
const CCM_STAGING: &[&str] = &[
    "k8s.io/cloud-provider",
    "k8s.io/component-base",
    "k8s.io/api",
    "k8s.io/apimachinery",
    "k8s.io/client-go",
    "k8s.io/controller-manager",
    "k8s.io/apiserver",
    "k8s.io/component-helpers",
];

/// The folder of `tag`'s pin.
fn pin_dir(tag: &Tag) -> PathBuf {
    pins_dir().join(tag.to_string())
}

/// The shape of a pin this harness makes, written into each as `format`: a pin of another shape
/// (one made before the node binaries were among its tools) is made again, not built from.
const PIN_FORMAT: &str = "2: kubelet, kube-proxy and agnhost among the tools, checked offline";

/// Whether `dir` holds a whole pin of this harness's [`PIN_FORMAT`].
fn is_current(dir: &Path) -> bool {
    dir.join("local-upstream-ccm").join("go.sum").is_file()
        && fs::read_to_string(dir.join("format")).is_ok_and(|format| format == PIN_FORMAT)
}

/// The modules of a pin made earlier, leaked so that they live as long as the embedded ones (one
/// pin per version per process); `None` when `version` has no pin in the cache.
pub fn load(version: &str) -> Option<(&'static str, &'static GoModule, &'static GoModule)> {
    let tag = Tag::parse(version)?;
    let dir = pin_dir(&tag);
    if !is_current(&dir) {
        return None;
    }
    let read = |module: &str, name: &str| fs::read_to_string(dir.join(module).join(name)).ok();
    let leak = |text: String| -> &'static str { Box::leak(text.into_boxed_str()) };
    let kube = GoModule {
        dir: leak(format!("pins/{tag}/kube")),
        go_mod: leak(read("kube", "go.mod")?),
        go_sum: leak(read("kube", "go.sum")?),
        files: Box::leak(Box::new([("e2e_imports.go", leak(read("kube", "e2e_imports.go")?))])),
    };
    let ccm = GoModule {
        dir: leak(format!("pins/{tag}/local-upstream-ccm")),
        go_mod: leak(read("local-upstream-ccm", "go.mod")?),
        go_sum: leak(read("local-upstream-ccm", "go.sum")?),
        files: super::pins::UPSTREAM_CCM_SOURCE,
    };
    Some((leak(tag.to_string()), Box::leak(Box::new(kube)), Box::leak(Box::new(ccm))))
}

/// Makes `tag`'s pin from the Go module proxy unless it is in the cache (see the module doc).
pub fn make(tag: &Tag) -> Result<()> {
    let dir = pin_dir(tag);
    if is_current(&dir) {
        return Ok(());
    }
    if served(std::slice::from_ref(tag))?.is_empty() {
        return Err(ToolchainError::NotServed { version: tag.to_string() });
    }
    let parent = pins_dir();
    fs::create_dir_all(&parent).map_err(io_err("creating", &parent))?;
    let lock_path = parent.join(format!("{tag}.lock"));
    let lock = fs::File::create(&lock_path).map_err(io_err("creating", &lock_path))?;
    lock.lock().map_err(io_err("locking", &lock_path))?;
    if is_current(&dir) {
        return Ok(());
    }
    let step = cli_support::progress::step(format!("pinning Kubernetes {tag} from the Go module proxy"));
    let partial = parent.join(format!("{tag}.partial"));
    let _ = fs::remove_dir_all(&partial);
    make_kube(tag, &partial.join("kube"))?;
    make_ccm(tag, &partial.join("local-upstream-ccm"), &partial.join("kube").join("go.sum"))?;
    for scratch in ["kube", "local-upstream-ccm"].map(|m| partial.join(m)) {
        for entry in fs::read_dir(&scratch).map_err(io_err("reading", &scratch))?.flatten() {
            let keep = ["go.mod", "go.sum", "e2e_imports.go"];
            if !keep.iter().any(|k| entry.file_name() == *k) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    let format = partial.join("format");
    fs::write(&format, PIN_FORMAT).map_err(io_err("writing", &format))?;
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&partial, &dir).map_err(io_err("renaming into place", &dir))?;
    step.done();
    Ok(())
}

/// Runs `go args` in `dir` with the proxy and no GOFLAGS; its stdout, or a [`ToolchainError`]
/// naming `what` with the log of its output.
fn go(dir: &Path, args: &[&str], what: &str) -> Result<String> {
    let go = find_go()?;
    let output =
        go.command().env("GOFLAGS", "").current_dir(dir).args(args).output().map_err(io_err("running go in", dir))?;
    if !output.status.success() {
        let log = dir.join("pin.log");
        let _ = fs::write(&log, [&output.stdout[..], &output.stderr[..]].concat());
        for line in String::from_utf8_lossy(&output.stderr).lines().rev().take(10) {
            tracing::error!("go: {line}");
        }
        return Err(ToolchainError::BuildFailed {
            what: what.to_owned(),
            status: output.status.to_string(),
            excerpt: crate::compiler_errors(&String::from_utf8_lossy(&output.stderr)).into(),
            log,
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Refuses a release whose go.mod needs a newer Go than the one the harness builds with: under
/// GOTOOLCHAIN=local its first `go` command would fail, and with the error only in a log.
fn check_go_line(tag: &Tag, go_mod: &str) -> Result<()> {
    match go_mod.lines().find_map(|line| line.trim().strip_prefix("go ")).map(str::trim) {
        Some(needs) => check_go_version(&tag.to_string(), needs),
        None => Ok(()),
    }
}

/// Refuses Kubernetes `version` when its go.mod's `go` line, `needs`, is newer than the machine's Go.
pub(crate) fn check_go_version(version: &str, needs: &str) -> Result<()> {
    let go = find_go()?;
    let have = go.version.strip_prefix("go").unwrap_or(&go.version);
    match go_newer(needs, have) {
        true => Err(ToolchainError::GoTooOld {
            version: version.to_owned(),
            needs: needs.to_owned(),
            go: go.path,
            have: go.version.clone(),
        }),
        false => Ok(()),
    }
}

/// Whether Go version `a` (`1.27.0`, `1.27`, `1.27rc1`) is newer than `b`.
fn go_newer(a: &str, b: &str) -> bool {
    let numbers = |v: &str| -> Vec<u32> {
        v.split('.')
            .map(|part| part.chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap_or(0))
            .collect()
    };
    let (mut a, mut b) = (numbers(a), numbers(b));
    let len = a.len().max(b.len());
    a.resize(len, 0);
    b.resize(len, 0);
    a > b
}

fn make_kube(tag: &Tag, dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    let module = format!("{KUBERNETES_MODULE}@{tag}");
    let what = format!("the pin of {module} (go mod tidy against the Go module proxy)");
    let info = go(dir, &["mod", "download", "-json", &module], &what)?;
    let info: serde_json::Value = serde_json::from_str(&info).map_err(|e| ToolchainError::BuildFailed {
        what: what.clone(),
        status: format!("go mod download -json printed no JSON: {e}"),
        excerpt: "".into(),
        log: dir.to_path_buf(),
    })?;
    let upstream_path = PathBuf::from(info["GoMod"].as_str().unwrap_or_default());
    let upstream = fs::read_to_string(&upstream_path).map_err(io_err("reading", &upstream_path))?;
    check_go_line(tag, &upstream)?;
    let ginkgo = required(&upstream, "github.com/onsi/ginkgo/v2").ok_or_else(|| ToolchainError::BuildFailed {
        what: what.clone(),
        status: "its go.mod does not require github.com/onsi/ginkgo/v2".into(),
        excerpt: "".into(),
        log: upstream_path.clone(),
    })?;
    let go_mod = dir.join("go.mod");
    fs::write(&go_mod, kube_go_mod(tag, &upstream)).map_err(io_err("writing", &go_mod))?;
    // What tools/kube/pin.sh names: every binary the toolchain builds from this module.
    let commands = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kube-proxy"];
    let tools: Vec<String> = commands
        .iter()
        .map(|cmd| format!("{KUBERNETES_MODULE}/cmd/{cmd}@{tag}"))
        .chain([format!("{KUBERNETES_MODULE}/test/images/agnhost@{tag}")])
        .chain([format!("github.com/onsi/ginkgo/v2/ginkgo@{ginkgo}")])
        .collect();
    let mut args = vec!["get", "-tool"];
    args.extend(tools.iter().map(String::as_str));
    go(dir, &args, &what)?;
    go(dir, &["get", "-t", &format!("{KUBERNETES_MODULE}/test/e2e@{tag}")], &what)?;
    let packages = go(
        dir,
        &[
            "list",
            "-f",
            "{{.ImportPath}}{{\"\\n\"}}{{join .TestImports \"\\n\"}}{{\"\\n\"}}{{join .XTestImports \"\\n\"}}",
            "k8s.io/kubernetes/test/e2e",
        ],
        &what,
    )?;
    let imports = dir.join("e2e_imports.go");
    fs::write(&imports, e2e_imports(tag, &packages)).map_err(io_err("writing", &imports))?;
    go(dir, &["mod", "tidy"], &what)?;
    check_offline(dir, &["-test", "k8s.io/kubernetes/test/e2e"], &what)?;
    check_offline(dir, &["tool"], &what)
}

/// `go list -deps ARGS` with no network and go.mod and go.sum as written: what the toolchain's
/// builds then need is all in the pin (as tools/kube/pin.sh checks its own).
fn check_offline(dir: &Path, args: &[&str], what: &str) -> Result<()> {
    let go = find_go()?;
    let output = go
        .command()
        .env("GOFLAGS", "-mod=readonly")
        .env("GOPROXY", "off")
        .current_dir(dir)
        .args(["list", "-deps"])
        .args(args)
        .output()
        .map_err(io_err("running go in", dir))?;
    if output.status.success() {
        return Ok(());
    }
    let log = dir.join("pin.log");
    let _ = fs::write(&log, &output.stderr);
    Err(ToolchainError::BuildFailed {
        what: format!("{what}: go list -deps {} with no network", args.join(" ")),
        status: output.status.to_string(),
        excerpt: crate::compiler_errors(&String::from_utf8_lossy(&output.stderr)).into(),
        log,
    })
}

fn make_ccm(tag: &Tag, dir: &Path, kube_sum: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    for (name, source) in super::pins::UPSTREAM_CCM_SOURCE {
        let path = dir.join(name);
        fs::write(&path, source).map_err(io_err("writing", &path))?;
    }
    let go_mod = dir.join("go.mod");
    fs::write(&go_mod, ccm_go_mod(tag)).map_err(io_err("writing", &go_mod))?;
    let go_sum = dir.join("go.sum");
    fs::copy(kube_sum, &go_sum).map_err(io_err("copying", kube_sum))?;
    let what = format!("the pin of local-upstream-ccm for Kubernetes {tag}");
    let staging = tag.staging();
    let modules: Vec<String> = CCM_STAGING.iter().map(|m| format!("{m}@{staging}")).collect();
    let mut args = vec!["get"];
    args.extend(modules.iter().map(String::as_str));
    go(dir, &args, &what)?;
    go(dir, &["mod", "tidy"], &what)?;
    Ok(())
}

/// The tags of `candidates` that the Go module proxy serves, asked in one `go list -m -e`.
/// The proxy serves versions its `@v/list` does not list, and refuses some tags that exist
/// upstream ("not available"), so each is asked for by name.
pub fn served(candidates: &[Tag]) -> Result<Vec<Tag>> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let dir = tempfile::tempdir().map_err(io_err("creating a temporary directory in", &std::env::temp_dir()))?;
    let modules: Vec<String> = candidates.iter().map(|t| format!("{KUBERNETES_MODULE}@{t}")).collect();
    let mut args = vec!["list", "-m", "-e", "-json"];
    args.extend(modules.iter().map(String::as_str));
    let output = go(dir.path(), &args, "asking the Go module proxy for Kubernetes versions")?;
    Ok(parse_served(&output))
}

/// The tags `go list -m -e -json` printed without an error.
pub fn parse_served(output: &str) -> Vec<Tag> {
    let mut tags: Vec<Tag> = serde_json::Deserializer::from_str(output)
        .into_iter::<serde_json::Value>()
        .filter_map(|v| v.ok())
        .filter(|v| v.get("Error").is_none())
        .filter_map(|v| Tag::parse(v.get("Version")?.as_str()?))
        .collect();
    tags.sort();
    tags.dedup();
    tags
}

/// A marker for the newest release: `latest`, or `latest-1.37` for the newest of one minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Latest,
    LatestOf { minor: u32 },
}

impl Marker {
    /// `latest` or `latest-1.MINOR`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Marker> {
        match text.trim().strip_prefix("latest")? {
            "" => Some(Marker::Latest),
            rest => {
                let minor = rest.strip_prefix("-1.")?;
                let canonical =
                    !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()) && !minor.starts_with('0');
                canonical.then(|| minor.parse().ok()).flatten().map(|minor| Marker::LatestOf { minor })
            }
        }
    }

    /// The stable tags the marker may stand for, oldest first: every patch of its minor, or for
    /// `latest` of `newest_known_minor` and the minor after it (a release the harness does not
    /// know of yet).
    pub fn candidates(self, newest_known_minor: u32) -> Vec<Tag> {
        let minors = match self {
            Marker::Latest => newest_known_minor..=newest_known_minor + 1,
            Marker::LatestOf { minor } => minor..=minor,
        };
        minors.flat_map(|minor| (0..=MAX_PATCH).map(move |patch| Tag { minor, patch, pre: None })).collect()
    }

    /// The newest of `tags` the marker stands for.
    pub fn pick(self, tags: &[Tag]) -> Option<Tag> {
        let fits = |tag: &&Tag| {
            tag.pre.is_none()
                && match self {
                    Marker::Latest => true,
                    Marker::LatestOf { minor } => tag.minor == minor,
                }
        };
        tags.iter().filter(fits).max().cloned()
    }
}

impl std::fmt::Display for Marker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Marker::Latest => write!(f, "latest"),
            Marker::LatestOf { minor } => write!(f, "latest-1.{minor}"),
        }
    }
}

/// The tags of the pins made earlier, in the cache.
pub fn cached() -> Vec<Tag> {
    let entries = fs::read_dir(pins_dir()).into_iter().flatten().flatten();
    let mut tags: Vec<Tag> = entries
        .filter(|entry| is_current(&entry.path()))
        .filter_map(|entry| Tag::parse(entry.file_name().to_str()?))
        .collect();
    tags.sort();
    tags
}

/// Pre-release numbers probed of each kind: Kubernetes has tagged at most alpha.5, beta.3, rc.3.
pub const MAX_PRE: u32 = 6;

/// Patch numbers probed above the bad end's line.
pub const MAX_PATCH: u32 = 30;

/// The tags that may lie on the way from `good` to `bad` (both excluded from the candidates'
/// lower end, `bad` included), in version order: every pre-release (up to [`MAX_PRE`] of each kind)
/// and patch of `bad`'s minor up to `bad`, and the pre-releases and `.0` of each minor between.
/// Later patches of `good`'s own minor are left out when `bad` is on a newer minor: they are on
/// `good`'s release branch, which `bad` does not descend from.
pub fn candidates(good: &Tag, bad: &Tag) -> Vec<Tag> {
    let mut tags = Vec::new();
    for minor in good.minor..=bad.minor {
        let patches = if minor == bad.minor { bad.patch } else { 0 };
        for patch in 0..=patches {
            if patch == 0 {
                for kind in PreKind::ALL {
                    tags.extend((0..=MAX_PRE).map(|n| Tag { minor, patch, pre: Some((kind, n)) }));
                }
            }
            tags.push(Tag { minor, patch, pre: None });
        }
    }
    tags.retain(|t| t > good && t <= bad && (bad.minor == good.minor || t.minor > good.minor));
    tags.sort();
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(text: &str) -> Tag {
        Tag::parse(text).unwrap_or_else(|| panic!("{text} parses"))
    }

    #[test]
    fn a_go_line_newer_than_the_machines_go_is_told_apart() {
        assert!(go_newer("1.27.0", "1.26.8"));
        assert!(go_newer("1.27", "1.26.8"));
        assert!(!go_newer("1.26.0", "1.26.8"));
        assert!(!go_newer("1.26", "1.26.0"));
        assert!(go_newer("1.26.10", "1.26.9"), "numbers, not text");
    }

    #[test]
    fn markers_are_latest_or_latest_of_one_minor_and_nothing_else() {
        assert_eq!(Marker::parse("latest"), Some(Marker::Latest));
        assert_eq!(Marker::parse(" latest-1.37 "), Some(Marker::LatestOf { minor: 37 }));
        for text in ["latest-1.", "latest-2.37", "latest-1.037", "latest-1.37.1", "latest-", "latests", "v1.37.1"] {
            assert_eq!(Marker::parse(text), None, "{text}");
        }
        assert_eq!(Marker::LatestOf { minor: 37 }.to_string(), "latest-1.37");
    }

    #[test]
    fn a_marker_picks_the_newest_stable_tag_of_its_minor() {
        let tags: Vec<Tag> = ["v1.36.5", "v1.37.0", "v1.37.2", "v1.38.0-beta.0", "v1.37.10"]
            .iter()
            .map(|t| Tag::parse(t).unwrap())
            .collect();
        assert_eq!(Marker::Latest.pick(&tags).unwrap().to_string(), "v1.37.10", "semver, not text, and no pre-release");
        assert_eq!(Marker::LatestOf { minor: 36 }.pick(&tags).unwrap().to_string(), "v1.36.5");
        assert_eq!(Marker::LatestOf { minor: 35 }.pick(&tags), None);
        let candidates = Marker::Latest.candidates(37);
        assert!(
            candidates.contains(&Tag::parse("v1.38.0").unwrap())
                && candidates.contains(&Tag::parse("v1.37.30").unwrap())
        );
        assert!(candidates.iter().all(|tag| tag.pre.is_none() && (37..=38).contains(&tag.minor)));
        assert!(Marker::LatestOf { minor: 36 }.candidates(37).iter().all(|tag| tag.minor == 36));
    }

    #[test]
    fn tags_parse_print_and_sort_as_semver() {
        let order =
            ["v1.36.4", "v1.37.0-alpha.2", "v1.37.0-alpha.10", "v1.37.0-beta.0", "v1.37.0-rc.1", "v1.37.0", "v1.37.1"];
        let tags: Vec<Tag> = order.iter().map(|t| tag(t)).collect();
        for (text, t) in order.iter().zip(&tags) {
            assert_eq!(t.to_string(), *text);
        }
        let mut shuffled = tags.clone();
        shuffled.reverse();
        shuffled.sort();
        assert_eq!(shuffled, tags);
        for bad in ["1.37.1", "v1.37", "v1.37.0-gamma.1", "v2.0.0", "v1.37.0-rc", "v1.37.0-0.20260101-abcdef", "v1.x.1"]
        {
            assert_eq!(Tag::parse(bad), None, "{bad}");
        }
        assert_eq!(tag("v1.37.0-rc.1").staging(), "v0.37.0-rc.1");
        assert_eq!(tag("v1.36.4").staging(), "v0.36.4");
    }

    #[test]
    fn candidates_run_from_after_good_to_bad_on_bads_line() {
        let c = candidates(&tag("v1.36.4"), &tag("v1.37.1"));
        assert_eq!(c.first(), Some(&tag("v1.37.0-alpha.0")));
        assert_eq!(c.last(), Some(&tag("v1.37.1")));
        assert!(c.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
        assert!(c.contains(&tag("v1.37.0-rc.1")) && c.contains(&tag("v1.37.0")));
        assert!(!c.contains(&tag("v1.36.5")), "v1.36.5 is on release-1.36, not an ancestor of v1.37.1");
        assert!(!c.iter().any(|t| t.minor == 37 && t.patch == 1 && t.pre.is_some()), "no v1.37.1-rc: never tagged");
        assert_eq!(c.len(), 3 * (MAX_PRE as usize + 1) + 2);

        let patches = candidates(&tag("v1.36.4"), &tag("v1.36.7"));
        assert_eq!(patches, ["v1.36.5", "v1.36.6", "v1.36.7"].map(tag));
        let pre = candidates(&tag("v1.37.0-beta.0"), &tag("v1.37.0-rc.1"));
        assert_eq!(pre.first(), Some(&tag("v1.37.0-beta.1")));
        assert_eq!(pre.last(), Some(&tag("v1.37.0-rc.1")));
        assert!(candidates(&tag("v1.37.1"), &tag("v1.37.1")).is_empty());
        let two_minors = candidates(&tag("v1.35.2"), &tag("v1.37.0"));
        assert!(two_minors.contains(&tag("v1.36.0-rc.0")) && two_minors.contains(&tag("v1.36.0")));
        assert!(!two_minors.contains(&tag("v1.36.1")), "a patch of 1.36 is not on the way to 1.37.0");
    }

    #[test]
    fn served_keeps_the_versions_without_an_error() {
        // The shape `go list -m -e -json` prints: one object per module, `Error` on refused ones.
        let output = r#"{
	"Path": "k8s.io/kubernetes",
	"Version": "v1.37.0-rc.1",
	"Time": "2026-08-19T21:16:06Z"
}
{
	"Path": "k8s.io/kubernetes",
	"Version": "v1.37.0-rc.0",
	"Error": {
		"Err": "k8s.io/kubernetes@v1.37.0-rc.0: reading https://proxy.golang.org/k8s.io/kubernetes/@v/v1.37.0-rc.0.info: 403 Forbidden"
	}
}
{
	"Path": "k8s.io/kubernetes",
	"Version": "v1.37.0-alpha.2"
}
"#;
        assert_eq!(parse_served(output), ["v1.37.0-alpha.2", "v1.37.0-rc.1"].map(tag));
    }

    #[test]
    fn the_kube_pin_replaces_every_staging_module_with_its_published_pre_release() {
        let upstream = "module k8s.io/kubernetes\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/onsi/ginkgo/v2 v2.31.0\n\tk8s.io/api v0.0.0\n)\n\n\
                        replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/client-go => ./staging/src/k8s.io/client-go\n\
                        \tgithub.com/x/y => github.com/x/z v1.0.0\n)\n";
        let text = kube_go_mod(&tag("v1.37.0-rc.1"), upstream);
        assert!(text.contains("module cloud-provider-harness/tools/kube/v1.37.0-rc.1\n"), "{text}");
        assert!(text.contains("\n\tk8s.io/api => k8s.io/api v0.37.0-rc.1\n"), "{text}");
        assert!(text.contains("\n\tk8s.io/client-go => k8s.io/client-go v0.37.0-rc.1\n"), "{text}");
        assert!(!text.contains("github.com/x/y"), "only staging replacements: {text}");
        assert!(!text.contains("./staging"), "{text}");
        assert_eq!(required(upstream, "github.com/onsi/ginkgo/v2").as_deref(), Some("v2.31.0"));
    }

    #[test]
    fn the_kube_pin_matches_what_pin_sh_wrote_for_the_embedded_release() {
        // The embedded v1.37 pin is pin.sh's output: its replace block is the generator's.
        let pin = &super::super::pins::KUBERNETES[0];
        let version = super::super::pins::required_version(pin, KUBERNETES_MODULE).unwrap();
        let t = tag(version);
        let embedded: Vec<&str> = pin.go_mod.lines().filter(|l| l.contains(" => ")).collect();
        let upstream: String = embedded
            .iter()
            .map(|l| format!("\t{0} => ./staging/src/{0}\n", l.split_whitespace().next().unwrap()))
            .collect::<String>();
        let generated = kube_go_mod(&t, &format!("replace (\n{upstream})\n"));
        let generated: Vec<&str> = generated.lines().filter(|l| l.contains(" => ")).collect();
        assert_eq!(generated, embedded);
    }

    #[test]
    fn e2e_imports_keeps_module_packages_sorted_and_is_never_built() {
        let text = e2e_imports(
            &tag("v1.37.0"),
            "k8s.io/kubernetes/test/e2e\nfmt\ntesting\ngithub.com/onsi/gomega\nk8s.io/kubernetes/test/e2e\n\n",
        );
        assert!(text.contains("//go:build tools\n"), "{text}");
        assert!(
            text.contains("import (\n\t_ \"github.com/onsi/gomega\"\n\t_ \"k8s.io/kubernetes/test/e2e\"\n)\n"),
            "{text}"
        );
        assert!(!text.contains("\"fmt\"") && !text.contains("\"testing\""), "{text}");
        assert!(ccm_go_mod(&tag("v1.37.0")).contains("module cloud-provider-harness/tools/local-upstream-ccm\n"));
    }
}
