//! A kubernetes/kubernetes git checkout as the source of a toolchain (`--kubernetes-source DIR`):
//! what a real k/k job has, where Prow's clonerefs puts the repository at its path alias
//! (`$GOPATH/src/k8s.io/kubernetes`). Its binaries are built inside the checkout, with its own
//! `go.work`, `staging/` and `vendor/`, and stamped as upstream's `hack/lib/version.sh` stamps them:
//! `git describe --tags --match='v*' --abbrev=14` made semver (`v1.37.1-3+0123456789abcd`,
//! `-dirty` for a tree `git status` calls dirty), the commit, the tree state, and the commit's time
//! as the build date. Its cache entry is keyed by commit and tree state, never by version string.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::{Result, ToolchainError};

/// What `git status` says of the checkout's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeState {
    Clean,
    Dirty,
}

impl TreeState {
    /// As upstream stamps it (`gitTreeState`).
    pub fn as_str(self) -> &'static str {
        match self {
            TreeState::Clean => "clean",
            TreeState::Dirty => "dirty",
        }
    }
}

/// A kubernetes/kubernetes checkout at one commit.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub dir: PathBuf,
    /// The full commit hash of `HEAD`.
    pub commit: String,
    /// The branch checked out, unless `HEAD` is detached (as Prow's clonerefs leaves it).
    pub branch: Option<String>,
    pub tree_state: TreeState,
    /// Upstream's version of the commit: `v1.37.1`, `v1.37.1-3+0123456789abcd`, `…-dirty`.
    pub version: String,
    /// The commit's time, as upstream's `buildDate` (`2026-01-01T00:00:00Z`).
    pub commit_time: String,
    /// The `go` line of its go.mod (`1.26.0`).
    pub go_line: Option<String>,
    /// What the build depends on beyond the commit: a digest of the changes of a dirty tree.
    changes: Option<String>,
}

impl Checkout {
    /// Opens `dir` as a kubernetes/kubernetes checkout, or says what it is not.
    pub fn open(dir: &Path) -> Result<Checkout> {
        let not = |reason: String| ToolchainError::NotACheckout { dir: dir.to_path_buf(), reason };
        let go_mod =
            std::fs::read_to_string(dir.join("go.mod")).map_err(|e| not(format!("it has no readable go.mod ({e})")))?;
        if module_path(&go_mod) != Some("k8s.io/kubernetes") {
            return Err(not("its go.mod is not module k8s.io/kubernetes".into()));
        }
        for part in ["cmd/kube-apiserver", "staging/src/k8s.io"] {
            if !dir.join(part).is_dir() {
                return Err(not(format!("it has no {part}/")));
            }
        }
        let dir = dir.canonicalize().map_err(|e| not(format!("cannot resolve it: {e}")))?;
        let git = Git { dir: &dir };
        let commit =
            git.run(&["rev-parse", "HEAD^{commit}"]).map_err(|e| not(format!("it is not a git checkout: {e}")))?;
        let branch = git.run(&["rev-parse", "--abbrev-ref", "HEAD"]).ok().filter(|b| b != "HEAD");
        let status = git.run(&["status", "--porcelain"]).map_err(not)?;
        let tree_state = if status.is_empty() { TreeState::Clean } else { TreeState::Dirty };
        let version = git.version_of("HEAD", tree_state).map_err(not)?;
        let commit_time =
            git.run(&["show", "-s", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "--format=%cd", "HEAD"]).map_err(not)?;
        let changes = match tree_state {
            TreeState::Clean => None,
            TreeState::Dirty => Some(git.changes_digest(&status).map_err(not)?),
        };
        Ok(Checkout { dir, commit, branch, tree_state, version, commit_time, go_line: go_line(&go_mod), changes })
    }

    /// The name of its toolchain's cache entry: `<commit>`, or `<commit>-dirty-<digest of the
    /// changes>` (a dirty tree that changes again is a new entry, its unchanged packages still
    /// in Go's build cache).
    pub fn entry_name(&self) -> String {
        match &self.changes {
            None => self.commit.clone(),
            Some(changes) => format!("{}-dirty-{}", self.commit, &changes[..16]),
        }
    }

    /// Writes at `file` a Go workspace over `module_dir` (a Go CCM's module), the checkout's own
    /// module and every staging module it has, as `add-kubernetes-to-workspace.sh` makes one for
    /// cloud-provider-kind and cloud-provider-gcp: built with `GOWORK=file`, the CCM takes each
    /// `k8s.io/*` library it shares with Kubernetes from this checkout, whatever its go.mod requires.
    pub fn write_workspace(&self, module_dir: &Path, file: &Path) -> Result<()> {
        let staging = self.dir.join("staging/src/k8s.io");
        let read = |path: &Path| std::fs::read_to_string(path).map_err(crate::io_err("reading", path));
        let mut modules: Vec<PathBuf> = std::fs::read_dir(&staging)
            .map_err(crate::io_err("reading", &staging))?
            .flatten()
            .map(|entry| entry.path())
            .filter(|dir| dir.join("go.mod").is_file())
            .collect();
        modules.sort();
        // go.work's `go` line must be at least every module's.
        let module_go = go_line(&read(&module_dir.join("go.mod"))?);
        let go = [self.go_line.clone(), module_go].into_iter().flatten().max_by_key(|v| go_version_key(v));
        let mut text = format!(
            "// Written by the harness: {} over kubernetes/kubernetes at {}.\n",
            module_dir.display(),
            self.commit
        );
        text.push_str(&format!("go {}\n\nuse (\n", go.unwrap_or_else(|| "1.26.0".into())));
        for dir in std::iter::once(module_dir).chain([self.dir.as_path()]).chain(modules.iter().map(PathBuf::as_path)) {
            text.push_str(&format!("\t{}\n", dir.display()));
        }
        text.push_str(")\n");
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(crate::io_err("creating", parent))?;
        }
        std::fs::write(file, text).map_err(crate::io_err("writing", file))
    }

    /// `1` and `37` of its version; `37+` when it is not exactly a release, as upstream's `gitMinor`.
    pub fn major_minor(&self) -> (String, String) {
        major_minor(&self.version).unwrap_or_else(|| ("1".into(), String::new()))
    }
}

struct Git<'a> {
    dir: &'a Path,
}

impl Git<'_> {
    /// `git` in the checkout, trimmed stdout; a checkout another user owns (a CI volume) is read too.
    fn run(&self, args: &[&str]) -> std::result::Result<String, String> {
        let output = Command::new("git")
            .arg("-c")
            .arg(format!("safe.directory={}", self.dir.display()))
            .arg("-C")
            .arg(self.dir)
            .args(args)
            .env("TZ", "UTC")
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        match output.status.success() {
            true => Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned()),
            false => Err(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
        }
    }

    /// Upstream's version of `rev` (`git describe`, made semver as [`semver_of_describe`]).
    fn version_of(&self, rev: &str, tree_state: TreeState) -> std::result::Result<String, String> {
        let described = self
            .run(&["describe", "--tags", "--match=v*", "--abbrev=14", &format!("{rev}^{{commit}}")])
            .map_err(|e| format!("no tag v* is reachable from {rev}, so it has no version (git describe: {e})"))?;
        semver_of_describe(&described, tree_state)
            .ok_or_else(|| format!("git describe gives '{described}' for {rev}, which is no semantic version"))
    }

    /// A digest of what a dirty tree changes: the diff against HEAD and every untracked file.
    fn changes_digest(&self, status: &str) -> std::result::Result<String, String> {
        let mut hasher = Sha256::new();
        hasher.update(self.run(&["diff", "HEAD", "--binary"])?);
        for untracked in status.lines().filter_map(|line| line.strip_prefix("?? ")) {
            hasher.update(untracked);
            let path = self.dir.join(untracked);
            hash_tree(&mut hasher, &path);
        }
        Ok(format!("{:x}", hasher.finalize()))
    }
}

/// Every file under `path` (a file or a directory git lists as untracked), path and contents.
fn hash_tree(hasher: &mut Sha256, path: &Path) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(path).into_iter().flatten().flatten().map(|entry| entry.path()).collect();
        entries.sort();
        for entry in entries {
            hasher.update(entry.to_string_lossy().as_bytes());
            hash_tree(hasher, &entry);
        }
    } else if let Ok(contents) = std::fs::read(path) {
        hasher.update(&contents);
    }
}

fn module_path(go_mod: &str) -> Option<&str> {
    go_mod.lines().find_map(|line| line.trim().strip_prefix("module ")).map(|path| path.trim().trim_matches('"'))
}

fn go_line(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|line| line.trim().strip_prefix("go ")).map(|v| v.trim().to_owned())
}

/// The version a clean checkout of commit `rev` of the repository at `dir` has (what
/// [`Checkout::open`] of a worktree of it says), without checking it out.
pub fn version_at(dir: &Path, rev: &str) -> Result<String> {
    Git { dir }
        .version_of(rev, TreeState::Clean)
        .map_err(|reason| ToolchainError::NotACheckout { dir: dir.to_path_buf(), reason })
}

/// `1.26.0` as numbers, to compare Go versions.
fn go_version_key(version: &str) -> Vec<u32> {
    version.split(|c: char| !c.is_ascii_digit()).map(|part| part.parse().unwrap_or(0)).collect()
}

/// `git describe` made a semantic version as `hack/lib/version.sh` makes it:
/// `v1.37.1-3-g<14 hex>` → `v1.37.1-3+<hex>`; `v1.37.0-alpha.1-5-g<hex>` → `v1.37.0-alpha.1.5+<hex>`;
/// an exact tag stays; `-dirty` is added for a dirty tree. `None` when the result is no semver.
pub fn semver_of_describe(described: &str, tree: TreeState) -> Option<String> {
    let mut version = described.to_owned();
    if let Some((base, hash)) = described.rsplit_once("-g")
        && hash.len() == 14
        && hash.chars().all(|c| c.is_ascii_hexdigit())
        && let Some((tag, distance)) = base.rsplit_once('-')
        && !distance.is_empty()
        && distance.chars().all(|c| c.is_ascii_digit())
    {
        // A tag with a pre-release (`v1.37.0-alpha.1`) continues its pre-release; a release tag starts one.
        let joiner = if tag.contains('-') { '.' } else { '-' };
        version = format!("{tag}{joiner}{distance}+{hash}");
    }
    if tree == TreeState::Dirty {
        version.push_str("-dirty");
    }
    is_semver(&version).then_some(version)
}

/// Upstream refuses to build a version that is no semver; ours are read as [`config::KubernetesVersion`].
fn is_semver(version: &str) -> bool {
    version.parse::<config::KubernetesVersion>().is_ok()
}

/// Upstream's `gitMajor` and `gitMinor` of a version: `37+` when anything follows `vX.Y.Z`.
fn major_minor(version: &str) -> Option<(String, String)> {
    let rest = version.strip_prefix('v')?;
    let mut parts = rest.splitn(3, '.');
    let major = parts.next()?.to_owned();
    let minor_and_rest = parts.next()?;
    let minor: String = minor_and_rest.chars().take_while(char::is_ascii_digit).collect();
    let patch_and_rest = parts.next().unwrap_or_default();
    let exact = !minor_and_rest[minor.len()..].contains(['-', '+']) && !patch_and_rest.contains(['-', '+']);
    Some((major, if exact { minor } else { format!("{minor}+") }))
}

/// How many checkouts' entries a cache keeps: each is ~1 GB of binaries and ~1.3 GB of node
/// images, and a bisection builds one per commit it tries.
pub const KEPT_ENTRIES: usize = 4;

/// Removes the `checkout-*` entries of `cache` (and their `.lock` and `.verified.json` files) but
/// the [`KEPT_ENTRIES`] newest by modification time; `keep` (the one just made) is never removed.
pub fn prune_entries(cache: &Path, keep: &Path) {
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("checkout-"))
        .filter(|entry| {
            entry.file_type().is_ok_and(|t| t.is_dir()) && !entry.file_name().to_string_lossy().contains('.')
        })
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .collect();
    entries.sort_by_key(|entry| std::cmp::Reverse(entry.0));
    for (_, old) in entries.into_iter().skip(KEPT_ENTRIES).filter(|(_, path)| path != keep) {
        tracing::info!("removing {}: the cache keeps the {KEPT_ENTRIES} newest checkouts' builds", old.display());
        let _ = std::fs::remove_dir_all(&old);
        let _ = std::fs::remove_file(old.with_extension("lock"));
        let _ = std::fs::remove_file(old.with_extension("verified.json"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_is_made_semver_as_upstream_makes_it() {
        let clean = TreeState::Clean;
        assert_eq!(semver_of_describe("v1.37.1", clean).as_deref(), Some("v1.37.1"));
        assert_eq!(semver_of_describe("v1.37.1-3-g0123456789abcd", clean).as_deref(), Some("v1.37.1-3+0123456789abcd"));
        assert_eq!(
            semver_of_describe("v1.37.0-alpha.1-234-g3f2a6b1c0d9e8f", clean).as_deref(),
            Some("v1.37.0-alpha.1.234+3f2a6b1c0d9e8f")
        );
        assert_eq!(
            semver_of_describe("v1.37.1-fixture.0-2-gabcdefabcdefab", TreeState::Dirty).as_deref(),
            Some("v1.37.1-fixture.0.2+abcdefabcdefab-dirty")
        );
        assert_eq!(semver_of_describe("v1.37.1", TreeState::Dirty).as_deref(), Some("v1.37.1-dirty"));
        assert_eq!(semver_of_describe("release-1.37", clean), None);
        assert_eq!(semver_of_describe("v1.37.1_x", clean), None);
    }

    #[test]
    fn the_minor_says_plus_for_anything_but_a_release() {
        assert_eq!(major_minor("v1.37.1"), Some(("1".into(), "37".into())));
        assert_eq!(major_minor("v1.37.1-3+0123456789abcd"), Some(("1".into(), "37+".into())));
        assert_eq!(major_minor("v1.38.0-alpha.1.5+0123456789abcd"), Some(("1".into(), "38+".into())));
        assert_eq!(major_minor("v1.37.1-dirty"), Some(("1".into(), "37+".into())));
    }

    #[test]
    fn a_directory_that_is_no_kubernetes_checkout_is_named_with_what_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let error = Checkout::open(dir.path()).unwrap_err().to_string();
        assert!(error.contains("no readable go.mod") && error.contains("--kubernetes-source"), "{error}");
        std::fs::write(dir.path().join("go.mod"), "module example.com/other\n\ngo 1.26.0\n").unwrap();
        let error = Checkout::open(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not module k8s.io/kubernetes"), "{error}");
    }

    /// A repository shaped enough like k/k for [`Checkout::open`]: go.mod, cmd/kube-apiserver, staging.
    fn tiny_checkout(tag: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("cmd/kube-apiserver")).unwrap();
        std::fs::create_dir_all(root.join("staging/src/k8s.io/api")).unwrap();
        std::fs::write(root.join("go.mod"), "module k8s.io/kubernetes\n\ngo 1.26.0\n").unwrap();
        std::fs::write(root.join("cmd/kube-apiserver/apiserver.go"), "package main\n").unwrap();
        std::fs::write(root.join("staging/src/k8s.io/api/doc.go"), "package api\n").unwrap();
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@localhost", "-C"])
                .arg(root)
                .args(args)
                .env("GIT_COMMITTER_DATE", "2026-03-04T05:06:07Z")
                .env("GIT_AUTHOR_DATE", "2026-03-04T05:06:07Z")
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q", "-b", "master"]);
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "first"]);
        git(&["tag", tag]);
        std::fs::write(root.join("cmd/kube-apiserver/apiserver.go"), "package main\n\n// changed\n").unwrap();
        git(&["commit", "-q", "-am", "second"]);
        dir
    }

    /// The workspace a Go CCM is built in over a checkout: the CCM's module, the checkout, and
    /// each staging directory that is a module, at the newer `go` line of the CCM's and the checkout's.
    #[test]
    fn a_ccm_workspace_uses_its_module_the_checkout_and_every_staging_module() {
        let repo = tiny_checkout("v1.37.1-fixture.0");
        let staging = repo.path().join("staging/src/k8s.io");
        std::fs::write(staging.join("api/go.mod"), "module k8s.io/api\n\ngo 1.26.0\n").unwrap();
        std::fs::create_dir_all(staging.join("not-a-module")).unwrap();
        let checkout = Checkout::open(repo.path()).unwrap();
        let ccm = tempfile::tempdir().unwrap();
        std::fs::write(ccm.path().join("go.mod"), "module example.com/ccm\n\ngo 1.26.3\n").unwrap();
        let file = ccm.path().join("workspaces/ccm.work");
        checkout.write_workspace(ccm.path(), &file).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let uses: Vec<PathBuf> = text.lines().filter_map(|l| l.strip_prefix('\t')).map(PathBuf::from).collect();
        let api = checkout.dir.join("staging/src/k8s.io/api");
        assert_eq!(uses, [ccm.path().to_path_buf(), checkout.dir.clone(), api], "{text}");
        assert!(text.contains("\ngo 1.26.3\n"), "{text}");
        let versions: Vec<String> =
            ["HEAD", "HEAD~1"].iter().map(|rev| version_at(repo.path(), rev).unwrap()).collect();
        let head = format!("v1.37.1-fixture.0.1+{}", &checkout.commit[..14]);
        assert_eq!(versions, [head, "v1.37.1-fixture.0".to_owned()], "as a clean worktree of each says");
        assert!(version_at(repo.path(), "no-such-rev").is_err());
    }

    #[test]
    fn a_commit_after_its_tag_is_versioned_keyed_and_dated_by_git() {
        let repo = tiny_checkout("v1.37.1-fixture.0");
        let checkout = Checkout::open(repo.path()).unwrap();
        assert_eq!(checkout.commit.len(), 40);
        assert_eq!(checkout.tree_state, TreeState::Clean);
        assert_eq!(checkout.version, format!("v1.37.1-fixture.0.1+{}", &checkout.commit[..14]));
        assert_eq!(checkout.major_minor(), ("1".into(), "37+".into()));
        assert_eq!(checkout.commit_time, "2026-03-04T05:06:07Z");
        assert_eq!(checkout.entry_name(), checkout.commit);
        assert_eq!(checkout.go_line.as_deref(), Some("1.26.0"));
        assert_eq!(checkout.branch.as_deref(), Some("master"));
    }

    #[test]
    fn a_checkouts_release_is_made_once_and_found_by_its_version() {
        let repo = tiny_checkout("v1.37.1-fixture.0");
        let release = crate::from_checkout(repo.path()).unwrap();
        let again = crate::from_checkout(repo.path()).unwrap();
        assert!(std::ptr::eq(release.source.unwrap(), again.source.unwrap()), "one release per checkout and commit");
        let found = crate::resolve(Some(release.version)).unwrap();
        assert!(std::ptr::eq(found.source.unwrap(), release.source.unwrap()), "{}", release.version);
        assert_eq!(release.cache_key(), format!("checkout-{}", release.source.unwrap().commit));
        assert_eq!(release.image_tag(), release.version.replace('+', "_"));
    }

    #[test]
    fn a_dirty_tree_is_its_own_entry_and_a_further_change_another() {
        let repo = tiny_checkout("v1.37.1");
        let file = repo.path().join("cmd/kube-apiserver/apiserver.go");
        std::fs::write(&file, "package main\n\n// edited\n").unwrap();
        let first = Checkout::open(repo.path()).unwrap();
        assert_eq!(first.tree_state, TreeState::Dirty);
        assert!(first.version.ends_with("-dirty"), "{}", first.version);
        assert!(first.entry_name().starts_with(&format!("{}-dirty-", first.commit)));
        std::fs::write(repo.path().join("cmd/kube-apiserver/new.go"), "package main\n").unwrap();
        let second = Checkout::open(repo.path()).unwrap();
        assert_ne!(first.entry_name(), second.entry_name(), "an untracked file changes the build");
    }

    #[test]
    fn only_the_newest_checkout_entries_are_kept() {
        let cache = tempfile::tempdir().unwrap();
        let made: Vec<PathBuf> = (0..KEPT_ENTRIES + 2)
            .map(|i| {
                let entry = cache.path().join(format!("checkout-{i:040}"));
                std::fs::create_dir(&entry).unwrap();
                let at = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + i as u64);
                std::fs::File::open(&entry).unwrap().set_modified(at).unwrap();
                entry
            })
            .collect();
        let release = cache.path().join("v1.37.1");
        std::fs::create_dir(&release).unwrap();
        std::fs::create_dir(cache.path().join("checkout-x.partial")).unwrap();
        let stamps = |entry: &PathBuf| entry.with_extension("verified.json");
        for entry in &made {
            std::fs::write(stamps(entry), "{}").unwrap();
        }
        prune_entries(cache.path(), &made[0]);
        let left: Vec<bool> = made.iter().map(|entry| entry.exists()).collect();
        // The oldest is kept as the one just made; the second oldest goes.
        assert_eq!(left[..2], [true, false], "{left:?}");
        assert!(left[2..].iter().all(|kept| *kept), "{left:?}");
        let stamped: Vec<bool> = made.iter().map(|entry| stamps(entry).exists()).collect();
        assert_eq!(stamped, left, "an entry's stamps go with it");
        assert!(release.exists() && cache.path().join("checkout-x.partial").exists());
    }

    #[test]
    fn a_checkout_without_a_tag_has_no_version_and_says_so() {
        let repo = tiny_checkout("not-a-version");
        let error = Checkout::open(repo.path()).unwrap_err().to_string();
        assert!(error.contains("no tag v*"), "{error}");
    }
}
