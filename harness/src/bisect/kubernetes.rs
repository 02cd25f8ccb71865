//! The Kubernetes side of `harness bisect`: the points are the Kubernetes release and pre-release
//! tags the Go module proxy serves between the two ends, in version order; each is run with the
//! provider's commit held fixed, on a toolchain pinned and built for it at run time
//! ([`toolchain::proxy_pins`]).
//!
//! Between two commits that are not tags, the proxy serves nothing (it refuses
//! `k8s.io/kubernetes@<commit>`, and the staging modules are published only at tags): those are
//! bisected in a kubernetes/kubernetes checkout (`--kubernetes-source`, the driver's
//! `checkout_plan`), each point a commit built in a worktree. See docs/providers.md, "Bisecting
//! the Kubernetes side".

use anyhow::{Context, Result, bail};

use config::{CcmBuild, Deployer, Provider, ProvidersConfig};
use toolchain::proxy_pins::{self, Tag};

/// Parses an end of the range, naming the flag and what it takes when it is not a tag.
pub fn end(flag: &str, text: &str) -> Result<Tag> {
    Tag::parse(text.trim()).with_context(|| {
        format!(
            "--{flag} {text:?} is not a Kubernetes release or pre-release tag: --side kubernetes bisects between tags \
             such as v1.36.4 and v1.37.1 (v1.37.0-rc.1 for a pre-release); commits are not served by the Go module \
             proxy, see docs/providers.md"
        )
    })
}

/// The points between `good` and `bad` (`bad` last), from the tags the proxy serves (`served`,
/// given the [`proxy_pins::candidates`]).
pub fn points_from(good: &Tag, bad: &Tag, served: &[Tag]) -> Result<Vec<String>> {
    if good >= bad {
        bail!("--good {good} is not older than --bad {bad}: the good end must be the older Kubernetes version");
    }
    if !served.contains(bad) {
        bail!(
            "the Go module proxy does not serve k8s.io/kubernetes@{bad} (the bad end): pick a --bad tag it serves \
             (`go list -m k8s.io/kubernetes@TAG` says)"
        );
    }
    let mut points: Vec<&Tag> = served.iter().filter(|t| *t > good && *t <= bad).collect();
    points.sort();
    points.dedup();
    Ok(points.into_iter().map(ToString::to_string).collect())
}

/// `--points`: the tags given (comma-separated or repeated), each between the ends, with `bad`
/// added as the last point; no proxy is asked.
pub fn given_points(good: &Tag, bad: &Tag, given: &[String]) -> Result<Vec<String>> {
    let mut tags = vec![bad.clone()];
    for text in given.iter().flat_map(|g| g.split(',')).map(str::trim).filter(|t| !t.is_empty()) {
        let tag = end("points", text)?;
        if tag <= *good || tag > *bad {
            bail!("--points {tag} is not between --good {good} and --bad {bad}");
        }
        tags.push(tag);
    }
    points_from(good, bad, &tags)
}

/// Whether a run of `provider` takes the toolchain of its Kubernetes version: the local deployer
/// starts its cluster from it, a `toolchain` CCM build and a ginkgo suite take binaries from it.
/// Other deployers bring their own cluster, so nothing is built for them.
pub fn needs_toolchain(config: &ProvidersConfig, provider: &Provider) -> bool {
    let ginkgo = provider
        .suites
        .iter()
        .chain(&provider.required.suites)
        .filter_map(|name| config.suite(name))
        .any(|suite| suite.kind.runs_e2e_test());
    matches!(provider.deployer, Deployer::Local { .. })
        || matches!(provider.ccm.build, CcmBuild::Toolchain { .. })
        || ginkgo
}

/// The points of `good..bad`, asking the proxy which candidates it serves.
pub fn points(good: &Tag, bad: &Tag) -> Result<Vec<String>> {
    if good >= bad {
        return points_from(good, bad, &[]);
    }
    let served = proxy_pins::served(&proxy_pins::candidates(good, bad))?;
    points_from(good, bad, &served)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(text: &str) -> Tag {
        Tag::parse(text).unwrap()
    }

    #[test]
    fn points_are_the_served_tags_after_good_up_to_bad_in_version_order() {
        // What the proxy served for v1.36.4..v1.37.1 on 2026-11-24 (docs/providers.md).
        let served =
            ["v1.37.1", "v1.37.0", "v1.37.0-alpha.3", "v1.37.0-rc.1", "v1.37.0-beta.0", "v1.37.0-alpha.2"].map(tag);
        let points = points_from(&tag("v1.36.4"), &tag("v1.37.1"), &served).unwrap();
        assert_eq!(
            points,
            ["v1.37.0-alpha.2", "v1.37.0-alpha.3", "v1.37.0-beta.0", "v1.37.0-rc.1", "v1.37.0", "v1.37.1"]
        );
        let narrower = points_from(&tag("v1.37.0-beta.0"), &tag("v1.37.0"), &served).unwrap();
        assert_eq!(narrower, ["v1.37.0-rc.1", "v1.37.0"]);
    }

    #[test]
    fn bad_ends_are_refused_with_what_to_do() {
        let served = [tag("v1.37.0")];
        let err = points_from(&tag("v1.37.1"), &tag("v1.37.0"), &served).unwrap_err().to_string();
        assert!(err.contains("not older than --bad v1.37.0"), "{err}");
        let err = points_from(&tag("v1.36.4"), &tag("v1.37.1"), &served).unwrap_err().to_string();
        assert!(err.contains("does not serve k8s.io/kubernetes@v1.37.1"), "{err}");
        let err = end("good", "abc123").unwrap_err().to_string();
        assert!(err.contains("--good \"abc123\" is not a Kubernetes release or pre-release tag"), "{err}");
        assert_eq!(end("bad", " v1.37.1 ").unwrap(), tag("v1.37.1"));
    }

    #[test]
    fn given_points_are_checked_against_the_ends_and_end_with_bad() {
        let (good, bad) = (tag("v1.36.4"), tag("v1.37.1"));
        let given = ["v1.37.0,v1.37.0-rc.1".to_owned(), "v1.37.0-beta.0".to_owned()];
        assert_eq!(
            given_points(&good, &bad, &given).unwrap(),
            ["v1.37.0-beta.0", "v1.37.0-rc.1", "v1.37.0", "v1.37.1"]
        );
        let err = given_points(&good, &bad, &["v1.36.2".to_owned()]).unwrap_err().to_string();
        assert!(err.contains("--points v1.36.2 is not between --good v1.36.4 and --bad v1.37.1"), "{err}");
        let err = given_points(&good, &bad, &["master".to_owned()]).unwrap_err().to_string();
        assert!(err.contains("--points \"master\" is not a Kubernetes release or pre-release tag"), "{err}");
    }
}
