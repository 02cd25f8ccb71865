//! Records the commit the harness is built from (`HARNESS_GIT_COMMIT`, `unknown` outside a git
//! checkout): a harness copied away from its checkout still knows it (`--version`, and the
//! provider version of a run of the bundled CCM).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (output.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HARNESS_GIT_COMMIT={commit}");
    // Built again when HEAD moves: to another branch, or its branch to another commit.
    for path in ["HEAD", "packed-refs"] {
        if let Some(file) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={file}");
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(file) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo:rerun-if-changed={file}");
    }
}
