//! The LKG as files and objects that existing scripts read: one line each, as provider
//! repositories pin Kubernetes (cloud-provider-gcp's `make print-k8s-version` reads its pin with
//! `cat FILE | tr -d '[:space:]'`, shell scripts with `$(cat FILE)`, kops's `versionFromFile` trims
//! the whole file), and marker objects in the store, as kops publishes `latest-ci-updown-green.txt`.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use bytes::Bytes;
use lkg::PairReport;
use lkg::api::{BuildLink, Snapshot};
use serde::Serialize;

use crate::store::{Put, ResultStore};

/// What `lkg export` writes: always exactly one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// The release tag or CI version the LKG was tested as (`v1.37.1`,
    /// `v1.37.0-alpha.1.234+0123456789abcd`), else its commit id.
    Version,
    /// The full commit id.
    Sha,
    /// The commit id's first 12 characters (as `harness lkg` prints commits).
    ShortSha,
    /// Provider, line, version, commits and evidence as one line of JSON.
    Json,
}

/// A provider's LKG on one line, with what names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Export {
    pub provider: String,
    pub line: String,
    /// The release tag or CI version it was tested as, else the commit id.
    pub kubernetes_version: String,
    pub kubernetes_commit: String,
    pub provider_commit: String,
    pub evidence: Vec<Evidence>,
}

/// A good build behind the LKG.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub build: String,
    pub artifacts_url: String,
}

impl Export {
    /// The LKG of `provider` on `line` (the newest line when `None`); an error when it has none.
    pub fn of(snapshot: &Snapshot, line: Option<&str>, provider: &str) -> Result<Export> {
        let view = lkg::api::provider(snapshot, line, provider)?;
        let Some(lkg) = &view.report.lkg else {
            bail!("provider {provider} has no good run on line {} yet: there is no LKG to export", view.line);
        };
        let (_, engine) = snapshot.line(Some(&view.line))?;
        let kubernetes_version = version_of(lkg, &view.builds, engine.kubernetes_history());
        Ok(Export {
            provider: provider.to_owned(),
            line: view.line.clone(),
            kubernetes_version,
            kubernetes_commit: lkg.kubernetes_commit.clone(),
            provider_commit: lkg.provider_commit.clone(),
            evidence: lkg
                .evidence
                .iter()
                .map(|build| Evidence {
                    build: build.clone(),
                    artifacts_url: view.builds.get(build).map(|b| b.artifacts_url.clone()).unwrap_or_default(),
                })
                .collect(),
        })
    }

    /// The one line `format` asks for, with its newline.
    pub fn line(&self, format: ExportFormat) -> String {
        let value = match format {
            ExportFormat::Version => self.kubernetes_version.clone(),
            ExportFormat::Sha => self.kubernetes_commit.clone(),
            ExportFormat::ShortSha => short_sha(&self.kubernetes_commit).to_owned(),
            ExportFormat::Json => serde_json::to_string(self).expect("an export serialises"),
        };
        format!("{value}\n")
    }

    /// What the LKG rests on, for people: never part of the version file.
    pub fn evidence_text(&self) -> String {
        let mut text = format!(
            "{} on line {}: Kubernetes {} ({}) with provider commit {}\n",
            self.provider, self.line, self.kubernetes_version, self.kubernetes_commit, self.provider_commit
        );
        for evidence in &self.evidence {
            text.push_str(&format!("evidence: {} {}\n", evidence.build, evidence.artifacts_url));
        }
        text
    }
}

/// A full commit id's first 12 characters; anything else as it is.
fn short_sha(commit: &str) -> &str {
    let is_sha = commit.len() >= 12 && commit.bytes().all(|b| b.is_ascii_hexdigit());
    if is_sha { &commit[..12] } else { commit }
}

/// The version the LKG was tested as: the version its evidence builds name when it is a release
/// or CI version, else the newest version tag of its commit, else the commit.
fn version_of(lkg: &PairReport, builds: &BTreeMap<String, BuildLink>, history: &lkg::History) -> String {
    let tested = lkg.evidence.iter().filter_map(|build| builds.get(build)).map(|b| b.kubernetes_version.as_str());
    let named = tested.filter(|version| super::histories::parse_version(version).is_some()).max_by(|a, b| {
        let (a, b) = (super::histories::parse_version(a), super::histories::parse_version(b));
        a.cmp(&b)
    });
    if let Some(version) = named {
        return version.to_owned();
    }
    let tagged = history
        .aliases_of(&lkg.kubernetes_commit)
        .filter_map(|tag| Some((super::histories::parse_version(tag)?, tag)))
        .max_by(|a, b| a.0.cmp_precedence(&b.0));
    tagged.map_or_else(|| lkg.kubernetes_commit.clone(), |(_, tag)| tag.to_owned())
}

/// `lkg/<provider>/<line>/latest-lkg.txt`.
pub fn marker_path(provider: &str, line: &str) -> String {
    format!("lkg/{provider}/{line}/latest-lkg.txt")
}

/// Writes every provider's marker objects on every line, each only when it changed; returns how
/// many objects were written.
pub async fn publish_markers(store: &ResultStore, snapshot: &Snapshot) -> Result<usize> {
    let mut written = 0;
    for (line, engine) in &snapshot.lines {
        for provider in engine.providers() {
            let Ok(export) = Export::of(snapshot, Some(line), provider) else { continue };
            let text = marker_path(provider, line);
            let json = text.replace(".txt", ".json");
            let bytes = [
                (text, Bytes::from(export.line(ExportFormat::Version))),
                (json, Bytes::from(export.line(ExportFormat::Json))),
            ];
            for (path, bytes) in bytes {
                if store.put_if_changed(&path, bytes).await? != Put::Unchanged {
                    written += 1;
                }
            }
        }
    }
    Ok(written)
}
