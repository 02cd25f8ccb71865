//! The builds a load holds: a few dozen bytes each, their provider, versions and release line
//! settled once when first read (providers.yaml is fixed for the life of a load), their strings
//! shared (job names, versions and lines repeat across thousands of builds). Where each build's
//! artifacts are is kept apart, in the answers' own persistent map.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use lkg::UnplacedRun;
use lkg::api::{BuildLink, BuildLinks};
use sha2::{Digest as _, Sha256};
use tracing::warn;

use super::{histories, provider_of};
use crate::index::LkgBuild;
use config::ProvidersConfig;

/// A finished build as a load holds it: what an update compares with the index, and what a
/// rebuild adds to the engines again.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub row: i64,
    pub job: Arc<str>,
    pub build: Box<str>,
    pub started_at: i64,
    /// `finished.json` `passed`: a build that failed is never good evidence.
    pub passed: Option<bool>,
    pub digest: Digest,
    pub place: Place,
}

impl Held {
    /// The id its run has in the engines and the answers: `job/build`.
    pub fn id(&self) -> String {
        run_id(&self.job, &self.build)
    }

    /// Its provider, versions and line, when it is ordered on a line.
    pub fn on_line(&self) -> Option<&OnLine> {
        match &self.place {
            Place::Line(on) => Some(on),
            Place::Versionless { .. } | Place::Foreign => None,
        }
    }
}

/// A build's run id in the engines and the answers.
fn run_id(job: &str, build: &str) -> String {
    format!("{job}/{build}")
}

/// A build's provider, its versions, and the release line they put it on.
#[derive(Debug, Clone)]
pub(super) struct OnLine {
    pub provider: Arc<str>,
    pub line: Arc<str>,
    pub kubernetes_version: Arc<str>,
    pub provider_version: Arc<str>,
}

/// Where a build's run goes.
#[derive(Debug, Clone)]
pub(super) enum Place {
    /// Ordered on a line by its versions.
    Line(OnLine),
    /// It names no version to order it by: listed among its provider's unplaced runs.
    Versionless { provider: Arc<str>, run: Box<UnplacedRun> },
    /// Of no provider in providers.yaml: left out.
    Foreign,
}

/// A build's SHA-256 digest as bytes (a digest that is not one is hashed, so equal digests stay
/// equal and different ones different).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Digest([u8; 32]);

impl Digest {
    pub fn of(digest: &str) -> Self {
        let mut bytes = [0u8; 32];
        match hex_decode(digest, &mut bytes) {
            Some(()) => Self(bytes),
            None => Self(Sha256::digest(digest.as_bytes()).into()),
        }
    }
}

fn hex_decode(hex: &str, out: &mut [u8; 32]) -> Option<()> {
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        let digit = |c: u8| (c as char).to_digit(16);
        *byte = u8::try_from(digit(pair[0])? << 4 | digit(pair[1])?).ok()?;
    }
    // Upper and lower case name the same bytes; only lower case is what the index writes.
    hex.iter().all(|c| !c.is_ascii_uppercase()).then_some(())
}

/// One allocation per distinct string a load holds.
#[derive(Debug, Default)]
pub(super) struct Strings(HashSet<Arc<str>>);

impl Strings {
    pub fn get(&mut self, value: &str) -> Arc<str> {
        if let Some(held) = self.0.get(value) {
            return held.clone();
        }
        let held: Arc<str> = Arc::from(value);
        self.0.insert(held.clone());
        held
    }
}

/// Builds taken in one at a time as a load holds them, with where each one ordered on a line has
/// its artifacts; builds of no provider and builds without versions are named in the log once
/// all are in.
pub(super) struct Holder<'a> {
    config: &'a ProvidersConfig,
    strings: &'a mut Strings,
    pub held: Vec<Held>,
    pub links: BuildLinks,
    foreign: BTreeSet<String>,
    versionless: BTreeMap<(Arc<str>, String), usize>,
}

impl<'a> Holder<'a> {
    pub fn new(config: &'a ProvidersConfig, strings: &'a mut Strings) -> Self {
        let (foreign, versionless) = (BTreeSet::new(), BTreeMap::new());
        Self { config, strings, held: Vec::new(), links: BuildLinks::new(), foreign, versionless }
    }

    pub fn add(&mut self, build: LkgBuild) {
        let place = place(self.config, &build, self.strings);
        match &place {
            Place::Line(on) => {
                let link = BuildLink {
                    artifacts_url: build.artifacts_url,
                    started_at: build.started_at,
                    kubernetes_version: on.kubernetes_version.to_string(),
                    provider_version: on.provider_version.to_string(),
                };
                self.links.insert(run_id(&build.job, &build.build), link);
            }
            Place::Versionless { provider, .. } => {
                *self.versionless.entry((provider.clone(), build.job.clone())).or_default() += 1;
            }
            Place::Foreign => {
                self.foreign.insert(build.provider.clone().unwrap_or_else(|| format!("(job {})", build.job)));
            }
        }
        self.held.push(Held {
            row: build.row,
            job: self.strings.get(&build.job),
            build: build.build.into_boxed_str(),
            started_at: build.started_at,
            passed: build.passed,
            digest: Digest::of(&build.digest),
            place,
        });
    }

    /// The builds held and their links, once what was left out is logged.
    pub fn finish(self) -> (Vec<Held>, BuildLinks) {
        if !self.foreign.is_empty() {
            let names = self.foreign.into_iter().collect::<Vec<_>>().join(", ");
            warn!("builds of providers not in {} left out: {names}", self.config.source.display());
        }
        for ((provider, job), count) in self.versionless {
            warn!("{count} build(s) of job {job} ({provider}) carry no versions: listed as unplaced");
        }
        (self.held, self.links)
    }
}

/// `builds` as a load holds them ([`Holder`]).
pub(super) fn hold(config: &ProvidersConfig, builds: Vec<LkgBuild>, strings: &mut Strings) -> (Vec<Held>, BuildLinks) {
    let mut holder = Holder::new(config, strings);
    builds.into_iter().for_each(|build| holder.add(build));
    holder.finish()
}

/// Each build with the name of its provider; builds of no provider in providers.yaml left out.
pub(super) fn with_providers(builds: &[Held]) -> Vec<(&Held, &str)> {
    builds
        .iter()
        .filter_map(|build| match &build.place {
            Place::Line(on) => Some((build, &*on.provider)),
            Place::Versionless { provider, .. } => Some((build, &**provider)),
            Place::Foreign => None,
        })
        .collect()
}

/// A build's provider (its own metadata, else providers.yaml's `prow.jobs` or job-name rule),
/// versions (the harness's keys, else Prow's fields) and release line.
fn place(config: &ProvidersConfig, build: &LkgBuild, strings: &mut Strings) -> Place {
    let Some(provider) = provider_of(config, build) else { return Place::Foreign };
    let provider_version = build.provider_version.clone().or_else(|| {
        let repo = provider.prow_repo()?;
        build.repos.get(&repo).and_then(|value| crate::layout::repo_ref_commit(value)).map(str::to_owned)
    });
    match (&build.kubernetes_version, provider_version) {
        (Some(kubernetes_version), Some(provider_version)) => Place::Line(OnLine {
            provider: strings.get(&provider.name),
            line: strings.get(&line_of(provider, kubernetes_version)),
            kubernetes_version: strings.get(kubernetes_version),
            provider_version: strings.get(&provider_version),
        }),
        _ => Place::Versionless {
            provider: strings.get(&provider.name),
            run: Box::new(UnplacedRun {
                build_id: run_id(&build.job, &build.build),
                kubernetes_version: build.kubernetes_version.clone().unwrap_or_default(),
                provider_version: build.provider_version.clone().unwrap_or_default(),
                problems: vec![missing_versions(build, provider)],
            }),
        },
    }
}

/// What a build without versions lacks, and where the harness looked.
fn missing_versions(build: &LkgBuild, provider: &config::Provider) -> String {
    let mut missing = Vec::new();
    if build.kubernetes_version.is_none() {
        missing.push(
            "no Kubernetes version (finished.json metadata kubernetes-version or job-version, or a kubernetes/kubernetes commit in started.json repos)"
                .to_owned(),
        );
    }
    if build.provider_version.is_none() {
        let repo = provider.prow_repo().unwrap_or_else(|| "the provider's repository".into());
        missing.push(format!(
            "no provider version (finished.json metadata provider-version, or a {repo} commit in started.json repos; set prow.repo in providers.yaml if its key differs)"
        ));
    }
    format!("carries {}", missing.join(" and "))
}

/// The line a run belongs to: the provider's `release-1.X` line when its Kubernetes version is a
/// 1.X (release, pre-release or CI version), else `master`.
fn line_of(provider: &config::Provider, kubernetes_version: &str) -> String {
    let minor = histories::parse_version(kubernetes_version).map(|v| format!("{}.{}", v.major, v.minor));
    provider
        .release_lines()
        .into_iter()
        .map(|(line, _)| line)
        .find(|line| minor.as_deref() == Some(line.as_str()))
        .unwrap_or_else(|| lkg::api::DEFAULT_LINE.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_equal_exactly_when_their_text_is() {
        let a = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let b = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a09";
        assert_eq!(Digest::of(a), Digest::of(a));
        assert_ne!(Digest::of(a), Digest::of(b));
        assert_eq!(Digest::of(a).0[..2], [0x9f, 0x86]);
        // Not a digest: hashed, still told apart from the digest it spells in capitals.
        assert_ne!(Digest::of(a), Digest::of(&a.to_uppercase()));
        assert_ne!(Digest::of("short"), Digest::of("shorter"));
        assert_eq!(Digest::of("short"), Digest::of("short"));
    }

    #[test]
    fn equal_strings_are_held_once() {
        let mut strings = Strings::default();
        let (a, b, c) = (strings.get("v1.36.0"), strings.get("v1.36.0"), strings.get("v1.37.0"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
    }
}
