//! `harness prow-config`: the flags an operator sets for their Prow instance, as
//! `config::prow::ProwOptions`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use config::prow::{self, ProwOptions, RepoRef, ResourceRequirements};

use super::ConfigArg;

#[derive(Debug, Args)]
pub struct ProwArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The test container's image: `harness image build`'s, with `harness` on PATH
    /// [default: ghcr.io/cloud-provider-harness/harness:<this harness's version>, e.g.
    /// v0.1.0-0123456789ab].
    #[arg(long)]
    pub image: Option<String>,
    /// The Prow build cluster the jobs run on.
    #[arg(long, default_value = prow::DEFAULT_CLUSTER)]
    pub cluster: String,
    /// The harness repository the jobs clone and start in: org/repo or its GitHub URL.
    #[arg(long, default_value = prow::DEFAULT_REPO)]
    pub repo: RepoRef,
    /// Its branch.
    #[arg(long, default_value = prow::DEFAULT_BASE_REF)]
    pub base_ref: String,
    /// Where clonerefs clones the harness repository from instead of GitHub (a mirror, an
    /// in-cluster git server): its ref's `clone_uri`.
    #[arg(long, value_name = "URI")]
    pub clone_uri: Option<String>,
    /// Clone nothing (`decoration_config.skip_cloning`): the jobs run the image's providers.yaml
    /// (/etc/cloud-provider-harness/providers.yaml) unless --providers-file names another.
    #[arg(long, conflicts_with_all = ["clone_uri", "kubernetes_ref", "postsubmits"])]
    pub skip_cloning: bool,
    /// The providers file the jobs' `harness run --config` reads: relative to the harness's
    /// checkout, or a path in the image [default: ./providers.yaml of the checkout].
    #[arg(long, value_name = "PATH")]
    pub providers_file: Option<String>,
    /// The test container's resource requests, as kubectl takes them (cpu=2,memory=4Gi), over
    /// the default of cpu=4,memory=8Gi; an empty value (cpu=) drops one.
    #[arg(long, value_name = "NAME=QUANTITY,...")]
    pub requests: Option<String>,
    /// The test container's limits, the same way (default cpu=4,memory=8Gi).
    #[arg(long, value_name = "NAME=QUANTITY,...")]
    pub limits: Option<String>,
    /// Prow's timeout of every job (`decoration_config.timeout`; `harness run --timeout` is 15
    /// minutes less) [default: each job's suites, CCM build and deploy, and 30 minutes].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// A YAML file of more `decoration_config` fields for every job (Prow's DecorationConfig:
    /// gcs_configuration, utility_images, grace_period, resources, …), over the Prow instance's
    /// defaults; Prow's checkconfig checks them.
    #[arg(long, value_name = "FILE")]
    pub decoration_config: Option<PathBuf>,
    /// `labels` of every job (e.g. a Prow preset: preset-service-account=true); repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Also a postsubmit on each provider's repository (its `repo`, pushes to its `branch`) per
    /// job of its newest minor, running the pushed commit (`--provider-dir`,
    /// `--provider-version $(PULL_BASE_SHA)`).
    #[arg(long)]
    pub postsubmits: bool,
    /// `testgrid-alert-email` of every job.
    #[arg(long)]
    pub alert_email: Option<String>,
    /// Test kubernetes/kubernetes at this branch (master, release-1.37) instead of the matrix's
    /// releases: each job clones it at its path alias k8s.io/kubernetes and runs `harness run
    /// --kubernetes-source` there; one job per provider and job, named …-k8s-<branch>.
    #[arg(long, value_name = "BRANCH")]
    pub kubernetes_ref: Option<String>,
    /// Write it to this file instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

impl ProwArgs {
    pub fn options(&self) -> Result<ProwOptions> {
        let defaults = ResourceRequirements::default();
        Ok(ProwOptions {
            image: self.image.clone().unwrap_or_else(|| prow::image(&harness::image_tag())),
            cluster: self.cluster.clone(),
            repo: self.repo.clone(),
            base_ref: self.base_ref.clone(),
            clone_uri: self.clone_uri.clone(),
            skip_cloning: self.skip_cloning,
            config_path: self.providers_file.clone(),
            timeout: self.timeout,
            resources: ResourceRequirements {
                requests: quantities("--requests", self.requests.as_deref(), defaults.requests)?,
                limits: quantities("--limits", self.limits.as_deref(), defaults.limits)?,
            },
            decoration: match &self.decoration_config {
                Some(file) => decoration_fields(file)?,
                None => BTreeMap::new(),
            },
            labels: key_values("--label", &self.labels)?,
            postsubmits: self.postsubmits,
            alert_email: self.alert_email.clone(),
            kubernetes_ref: self.kubernetes_ref.clone(),
            ..ProwOptions::default()
        })
    }
}

/// `cpu=2,memory=4Gi` over `defaults`; `cpu=` drops `cpu`.
fn quantities(
    flag: &str,
    given: Option<&str>,
    mut defaults: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>> {
    let Some(given) = given else { return Ok(defaults) };
    for pair in given.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, quantity)) = pair.split_once('=') else {
            bail!("{flag} {given}: `{pair}` is not NAME=QUANTITY (write {flag} cpu=2,memory=4Gi)");
        };
        let (name, quantity) = (name.trim(), quantity.trim());
        if quantity.is_empty() {
            defaults.remove(name);
        } else if is_quantity(quantity) {
            defaults.insert(name.to_owned(), quantity.to_owned());
        } else {
            bail!("{flag} {given}: `{quantity}` is not a Kubernetes quantity (2, 500m, 4Gi, 1.5G)");
        }
    }
    Ok(defaults)
}

/// Kubernetes' quantity syntax: a decimal number with an optional SI, binary or exponent suffix.
fn is_quantity(text: &str) -> bool {
    static QUANTITY: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$").unwrap()
    });
    QUANTITY.is_match(text)
}

fn key_values(flag: &str, pairs: &[String]) -> Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_owned(), value.trim().to_owned())),
            _ => bail!("{flag} {pair}: write it as KEY=VALUE"),
        })
        .collect()
}

/// The fields of a `decoration_config` file; the timeout and cloning have flags of their own.
fn decoration_fields(file: &std::path::Path) -> Result<BTreeMap<String, serde_yaml_ng::Value>> {
    let text = std::fs::read_to_string(file).with_context(|| format!("--decoration-config {}", file.display()))?;
    let fields: BTreeMap<String, serde_yaml_ng::Value> = serde_yaml_ng::from_str(&text).with_context(|| {
        format!("--decoration-config {}: not a YAML mapping of Prow's DecorationConfig fields", file.display())
    })?;
    for (field, flag) in [("timeout", "--timeout"), ("skip_cloning", "--skip-cloning")] {
        if fields.contains_key(field) {
            bail!("--decoration-config {}: `{field}` is set with {flag}; remove it from the file", file.display());
        }
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_override_the_defaults_and_bad_ones_say_how_to_write_them() {
        let defaults = ResourceRequirements::default().requests;
        let given = quantities("--requests", Some("cpu=500m, memory=1.5Gi"), defaults.clone()).unwrap();
        assert_eq!(given, BTreeMap::from([("cpu".into(), "500m".into()), ("memory".into(), "1.5Gi".into())]));
        let dropped = quantities("--limits", Some("cpu="), defaults.clone()).unwrap();
        assert_eq!(dropped.keys().collect::<Vec<_>>(), ["memory"]);
        let added = quantities("--limits", Some("ephemeral-storage=20Gi"), defaults.clone()).unwrap();
        assert_eq!(added.len(), 3);
        for bad in ["cpu=two", "cpu=4GB", "cpu", "memory=1e"] {
            let error = quantities("--requests", Some(bad), defaults.clone()).unwrap_err().to_string();
            assert!(error.starts_with(&format!("--requests {bad}: ")), "{error}");
        }
        for good in ["2", "0.5", "100m", "8Gi", "1e3", "5M"] {
            assert!(is_quantity(good), "{good}");
        }
    }

    #[test]
    fn a_decoration_file_may_not_set_what_flags_set() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("decoration.yaml");
        std::fs::write(&file, "grace_period: 30s\ntimeout: 1h\n").unwrap();
        let error = decoration_fields(&file).unwrap_err().to_string();
        assert!(error.contains("`timeout` is set with --timeout"), "{error}");
        std::fs::write(&file, "- a list\n").unwrap();
        let error = format!("{:#}", decoration_fields(&file).unwrap_err());
        assert!(error.contains("not a YAML mapping"), "{error}");
        std::fs::write(&file, "grace_period: 30s\n").unwrap();
        assert_eq!(decoration_fields(&file).unwrap().len(), 1);
    }
}
