//! The workspace's shape, checked: every dependency between the workspace's crates is one that
//! `docs/design.md` allows (its `dependency-graph` block), so layers only ever depend on the ones
//! below them, and no module is named like a crate its code can use.
//!
//! It reads `cargo metadata` (no build) and the sources: fast, and needs nothing but cargo.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("harness/ lives in the workspace").to_path_buf()
}

/// The crate that may only ever be a dev-dependency: test helpers.
const DEV_ONLY: &str = "testing";

/// `crate -> [crates it may depend on]`, from the `text dependency-graph` block of docs/design.md.
fn allowed_graph(design: &str) -> BTreeMap<String, BTreeSet<String>> {
    let block = design
        .split("```text dependency-graph\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/design.md has a ```text dependency-graph block");
    let mut graph = BTreeMap::new();
    for line in block.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (name, deps) = line.split_once("->").unwrap_or_else(|| panic!("`{line}`: expected `crate -> a, b`"));
        let deps = deps.split(',').map(str::trim).filter(|d| !d.is_empty()).map(str::to_owned).collect();
        assert!(graph.insert(name.trim().to_owned(), deps).is_none(), "{name} is listed twice");
    }
    graph
}

struct Package {
    name: String,
    /// The names its code uses for its dependencies (`serde_yaml_ng`, `local_cluster`), with their
    /// package names and kinds (`normal`, `dev`, `build`).
    dependencies: Vec<(String, String, String)>,
    manifest: PathBuf,
}

fn workspace_packages() -> Vec<Package> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["metadata", "--format-version=1", "--no-deps", "--offline"])
        .output()
        .expect("running cargo metadata");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let members: BTreeSet<&str> =
        metadata["workspace_members"].as_array().unwrap().iter().map(|id| id.as_str().unwrap()).collect();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| members.contains(p["id"].as_str().unwrap()))
        .map(|p| Package {
            name: p["name"].as_str().unwrap().to_owned(),
            dependencies: p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let package = d["name"].as_str().unwrap().to_owned();
                    let used_as = d["rename"].as_str().map_or_else(|| package.replace('-', "_"), str::to_owned);
                    let kind = d["kind"].as_str().unwrap_or("normal").to_owned();
                    (used_as, package, kind)
                })
                .collect(),
            manifest: PathBuf::from(p["manifest_path"].as_str().unwrap()),
        })
        .collect()
}

/// Every edge between workspace crates that the design does not allow, as `a -> b (kind)`.
fn forbidden_edges(packages: &[Package], allowed: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let workspace: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let mut forbidden = Vec::new();
    for package in packages {
        let Some(may) = allowed.get(&package.name) else {
            forbidden.push(format!("{} is not in docs/design.md's dependency graph", package.name));
            continue;
        };
        for (_, dependency, kind) in &package.dependencies {
            if !workspace.contains(dependency.as_str()) || dependency == &package.name {
                continue;
            }
            let ok = match kind.as_str() {
                "dev" => {
                    dependency == DEV_ONLY || may.contains(dependency) || lower(allowed, &package.name, dependency)
                }
                _ => dependency != DEV_ONLY && may.contains(dependency),
            };
            if !ok {
                forbidden.push(format!("{} -> {dependency} ({kind})", package.name));
            }
        }
    }
    forbidden
}

/// Whether `to` is below `from`: reachable from it through allowed edges. A crate's tests may use
/// any crate below it.
fn lower(allowed: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_owned()];
    while let Some(name) = stack.pop() {
        for next in allowed.get(&name).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    false
}

/// The crates `allowed` lets depend on each other in a circle, if any.
fn cycle(allowed: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    allowed.keys().find(|name| lower(allowed, name, name)).cloned()
}

/// `mod NAME` declarations in `dir`'s Rust files whose name is one the crate's code uses for a
/// dependency: such a module shadows the crate in paths and misleads the reader.
fn modules_named_like_crates(dir: &Path, crate_names: &BTreeSet<String>, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !["target", "node_modules", "data"].contains(&entry.file_name().to_str().unwrap_or_default()) {
                modules_named_like_crates(&path, crate_names, found);
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (number, line) in text.lines().enumerate() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "mod") else { continue };
            if words[..at].iter().any(|w| !w.starts_with("pub") && !w.starts_with("#[")) {
                continue;
            }
            let Some(name) = words.get(at + 1).map(|w| w.trim_end_matches([';', '{'])) else { continue };
            if crate_names.contains(name) {
                found.push(format!("{}:{}: mod {name}", path.display(), number + 1));
            }
        }
    }
}

#[test]
fn workspace_dependencies_follow_the_design() {
    let design = std::fs::read_to_string(workspace_root().join("docs/design.md")).expect("docs/design.md");
    let allowed = allowed_graph(&design);
    assert_eq!(cycle(&allowed), None, "docs/design.md's dependency graph has a cycle through this crate");
    let packages = workspace_packages();
    assert!(packages.len() >= 10, "cargo metadata listed {} workspace crates", packages.len());
    let forbidden = forbidden_edges(&packages, &allowed);
    assert!(
        forbidden.is_empty(),
        "dependencies docs/design.md does not allow (move the code to the crate that owns it, or change the design and this graph together):\n  {}",
        forbidden.join("\n  ")
    );
    let listed: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let stale: Vec<&String> = allowed.keys().filter(|name| !listed.contains(name.as_str())).collect();
    assert!(stale.is_empty(), "docs/design.md's graph lists crates the workspace does not have: {stale:?}");
}

#[test]
fn no_module_is_named_like_a_crate_its_code_can_use() {
    let mut found = Vec::new();
    for package in workspace_packages() {
        let names: BTreeSet<String> = package.dependencies.iter().map(|(used_as, _, _)| used_as.clone()).collect();
        // The whole package: src/, tests/, benches/, examples/, and targets at its root (e2e's main.rs).
        modules_named_like_crates(package.manifest.parent().unwrap(), &names, &mut found);
    }
    assert!(found.is_empty(), "modules named like a crate they shadow (rename the module):\n  {}", found.join("\n  "));
}

/// The deployers that run no local cluster (`existing`, `kind`, `kubetest2`, and `command`, which
/// runs their programs) never reach into `local-cluster`: what they share with it (the state
/// root) lives below both, in `cli-support`.
#[test]
fn deployers_that_run_no_local_cluster_do_not_use_local_cluster() {
    let deploy = workspace_root().join("harness/src/deploy");
    let mut found = Vec::new();
    for deployer in ["existing", "kind", "kubetest2", "command"] {
        let mut files = vec![deploy.join(format!("{deployer}.rs"))];
        let dir = deploy.join(deployer);
        files.extend(std::fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.path()));
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            for (number, line) in text.lines().enumerate().filter(|(_, l)| l.contains("local_cluster")) {
                found.push(format!("{}:{}: {}", file.display(), number + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "deployers that run no local cluster use local-cluster:\n  {}", found.join("\n  "));
}

/// The CCM library a provider forks gives typed errors (`app::AppError`, `app::InitError`): a
/// fork's `main` needs no error crate of ours.
#[test]
fn the_ccm_library_has_no_anyhow_in_its_dependencies() {
    let packages = workspace_packages();
    let ccm = packages.iter().find(|p| p.name == "ccm").expect("the ccm crate");
    let anyhow: Vec<_> = ccm.dependencies.iter().filter(|(_, package, _)| package == "anyhow").collect();
    assert!(anyhow.is_empty(), "ccm depends on anyhow: {anyhow:?}");
}

#[test]
fn the_check_catches_an_upward_edge_and_a_cycle() {
    let allowed = allowed_graph("```text dependency-graph\na -> b\nb -> c\nc ->\ntesting -> c\n```\n");
    let package = |name: &str, deps: &[(&str, &str)]| Package {
        name: name.into(),
        dependencies: deps.iter().map(|(d, k)| (d.to_string(), d.to_string(), k.to_string())).collect(),
        manifest: PathBuf::new(),
    };
    let ok = [
        package("a", &[("b", "normal"), ("c", "dev"), ("testing", "dev")]),
        package("b", &[]),
        package("c", &[]),
        package("testing", &[("c", "normal")]),
    ];
    assert!(forbidden_edges(&ok, &allowed).is_empty(), "{:?}", forbidden_edges(&ok, &allowed));
    let upward = [
        package("c", &[("a", "normal")]),
        package("b", &[("testing", "normal")]),
        package("a", &[]),
        package("testing", &[]),
    ];
    assert_eq!(forbidden_edges(&upward, &allowed), ["c -> a (normal)", "b -> testing (normal)"]);
    let test_upward = [package("c", &[("b", "dev")]), package("b", &[]), package("a", &[]), package("testing", &[])];
    assert_eq!(forbidden_edges(&test_upward, &allowed), ["c -> b (dev)"]);
    let circular = allowed_graph("```text dependency-graph\na -> b\nb -> a\n```\n");
    assert!(cycle(&circular).is_some());
    assert_eq!(cycle(&allowed), None);
}
