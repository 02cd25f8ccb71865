//! The shape of `providers.yaml` as serde reads it: every field, no meaning yet.
//!
//! Things with a `kind` (deployer, suite, CCM build and deploy) are one struct with the options of
//! every kind, not serde enums: serde_yaml_ng reads externally tagged enums only from YAML tags, and
//! internally tagged ones lose the positions of their fields. [`super::validate`] then turns these
//! into the typed [`super::ProvidersConfig`], refusing the options a kind does not take.
//! Closed sets (capabilities, kinds) and formats (versions, durations) are strings here, checked
//! there, so their errors can say what the valid values are.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFile {
    pub testgrid: RawTestGrid,
    #[serde(default)]
    pub suites: Vec<RawSuite>,
    pub providers: Vec<RawProvider>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTestGrid {
    pub gcs_bucket: String,
    pub dashboard_group: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSuite {
    pub name: String,
    pub kind: String,
    pub timeout: Option<String>,
    pub focus: Option<String>,
    pub skip: Option<String>,
    pub parallel: Option<u16>,
    pub args: Option<Vec<String>>,
    pub command: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub dir: Option<String>,
    pub flake_attempts: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    pub name: String,
    pub repo: String,
    pub branch: String,
    /// Release branches (`release-1.36`): a release line each.
    pub branches: Option<Vec<String>>,
    pub prow: Option<RawProw>,
    pub kubernetes: Vec<String>,
    pub ccm: RawCcm,
    pub deployer: RawDeployer,
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub unsupported: BTreeMap<String, String>,
    pub suites: Vec<String>,
    #[serde(default)]
    pub required: RawRequired,
    #[serde(default)]
    pub hooks: RawHooks,
    #[serde(default)]
    pub load_balancer_services: RawLoadBalancerServices,
    #[serde(default)]
    pub flake: RawFlake,
    #[serde(default)]
    pub known_failures: Vec<RawKnownFailure>,
    pub interval: Option<String>,
    pub jobs: Option<Vec<RawJob>>,
    #[serde(default)]
    pub testgrid: RawProviderTestGrid,
    pub certification: Option<RawCertification>,
}

/// The product a `certified-conformance` run certifies: `PRODUCT.yaml`'s fields.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCertification {
    pub vendor: String,
    pub name: String,
    pub version: String,
    pub website_url: String,
    pub repo_url: Option<String>,
    pub documentation_url: String,
    pub product_logo_url: Option<String>,
    #[serde(rename = "type")]
    pub product_type: String,
    pub description: String,
    pub contact_email_address: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProw {
    #[serde(default)]
    pub jobs: Vec<String>,
    pub repo: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCcm {
    pub build: RawBuild,
    pub deploy: RawDeploy,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBuild {
    pub kind: String,
    // cargo
    pub package: Option<String>,
    pub bin: Option<String>,
    // command
    pub command: Option<Vec<String>>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub dir: Option<String>,
    pub binary: Option<String>,
    pub manifest: Option<String>,
    // both
    pub timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDeploy {
    pub kind: String,
    // process, command
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    // manifest
    pub path: Option<String>,
    // command
    pub command: Option<Vec<String>>,
    pub dir: Option<String>,
    // all
    pub timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDeployer {
    pub kind: String,
    // local
    pub nodes: Option<u32>,
    pub cloud: Option<String>,
    pub node_kind: Option<String>,
    // local with `cloud: vcsim`
    pub zones: Option<Vec<String>>,
    pub region: Option<String>,
    // existing
    pub kubeconfig: Option<String>,
    // kind
    pub config: Option<String>,
    pub image: Option<String>,
    // kubetest2
    pub deployer: Option<String>,
    pub args: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRequired {
    pub suites: Option<Vec<String>>,
    #[serde(default)]
    pub tests: Vec<RawTestMatcher>,
}

/// How failures that may be flakes are treated.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFlake {
    /// Runs of a failing commit before `harness bisect` counts it bad.
    pub runs: Option<u32>,
}

/// A test the provider accepts failing: which (a name, or `{regex: ...}`), in which suite, why, and
/// where that is tracked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKnownFailure {
    pub test: RawTestMatcher,
    pub suite: Option<String>,
    pub reason: String,
    pub link: String,
}

/// What the suites' LoadBalancer Services carry for this provider's cloud.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLoadBalancerServices {
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub udp_annotations: BTreeMap<String, String>,
    pub load_balancer_class: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHooks {
    pub terminate_instance: Option<RawHook>,
    pub shutdown_instance: Option<RawHook>,
    pub start_instance: Option<RawHook>,
    pub list_load_balancers: Option<RawHook>,
    pub probe_load_balancer: Option<RawHook>,
    pub run_on_cloud_network: Option<RawHook>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHook {
    pub command: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJob {
    /// Left out: the provider's default job, named as if it had no `jobs`.
    #[serde(default)]
    pub name: Option<String>,
    pub suites: Vec<String>,
    pub interval: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProviderTestGrid {
    pub dashboard: Option<String>,
    pub num_failures_to_alert: Option<u16>,
}

/// A required test: a plain string is a test name, `{regex: ...}` a pattern.
#[derive(Debug)]
pub enum RawTestMatcher {
    Name(String),
    Regex(String),
}

impl<'de> Deserialize<'de> for RawTestMatcher {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TestMatcherVisitor)
    }
}

struct TestMatcherVisitor;

impl<'de> Visitor<'de> for TestMatcherVisitor {
    type Value = RawTestMatcher;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a test name, or `regex: <pattern>`")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<RawTestMatcher, E> {
        Ok(RawTestMatcher::Name(name.to_owned()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawTestMatcher, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::missing_field("regex"));
        };
        if key != "regex" {
            return Err(de::Error::unknown_field(&key, &["regex"]));
        }
        let pattern: String = map.next_value()?;
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::unknown_field(&extra, &["regex"]));
        }
        Ok(RawTestMatcher::Regex(pattern))
    }
}
