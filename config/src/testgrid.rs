//! TestGrid configuration generated from plain provider data.
//!
//! Each job becomes one test group, named after the job, that reads the Prow layout under its
//! `gcs_prefix` (`bucket/logs/<job>`), with two extra header rows taken from the `metadata` of each
//! build's `finished.json`: `kubernetes-version` and `provider-version`. Each job is also a tab, named
//! after the job, on its provider's dashboard, or on the job's own (a certification job's
//! `conformance-<provider's dashboard>`, which shows only full, skip-free conformance runs); when a
//! dashboard group is named, it lists every dashboard. Everything is sorted by name, so
//! regenerating from the same data gives the same bytes whatever order the providers and jobs came
//! in.
//!
//! Field names are those of TestGrid's `pb/config/config.proto` (GoogleCloudPlatform/testgrid), which
//! `config/yamlcfg` reads through `sigs.k8s.io/yaml`, i.e. under the protobuf snake_case names.
//! Confirmed against config.proto: `Configuration.{test_groups, dashboards, dashboard_groups}`,
//! `TestGroup.{name, gcs_prefix, column_header, num_failures_to_alert}`,
//! `TestGroup.ColumnHeader.configuration_value`, `Dashboard.{name, dashboard_tab}`,
//! `DashboardTab.{name, test_group_name}`, `DashboardGroup.{name, dashboard_names}`. config.proto marks
//! `TestGroup.num_failures_to_alert` deprecated in favour of
//! `DashboardTab.alert_options.num_failures_to_alert`; yamlcfg still reads and defaults it.
//!
//! Validation covers what this input can get wrong of TestGrid's own `config.Validate`: names must
//! keep a letter or digit, test group names must be unique once normalised (lower-cased, letters and
//! digits only), and every tab must show a defined test group.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// The `finished.json` metadata keys shown as header rows above every test group's columns.
pub const COLUMN_HEADER_KEYS: [&str; 2] = ["kubernetes-version", "provider-version"];

/// Everything the generator needs: the providers, and the group to list their dashboards under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestGridInput {
    /// Name of a dashboard group listing every dashboard; `None` when the dashboards join a group
    /// defined elsewhere (TestGrid lets a dashboard belong to one group only).
    pub dashboard_group: Option<String>,
    pub providers: Vec<Provider>,
}

/// One cloud provider and the CI jobs whose results TestGrid should show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    pub name: String,
    /// The dashboard its jobs appear on as tabs; several providers may share one.
    pub dashboard: String,
    /// Consecutive failures before TestGrid alerts; 0 leaves it to TestGrid's default.
    pub num_failures_to_alert: u16,
    pub jobs: Vec<Job>,
}

/// A job and where its builds live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub name: String,
    /// `bucket/logs/<job>`; a leading `gs://` is stripped, any other scheme is an error.
    pub gcs_prefix: String,
    /// The dashboard its tab is on (a certification job's is `conformance-*`); `None`: its
    /// provider's.
    pub dashboard: Option<String>,
}

/// TestGrid's `Configuration` message, reduced to the fields we set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    pub test_groups: Vec<TestGroup>,
    pub dashboards: Vec<Dashboard>,
    pub dashboard_groups: Vec<DashboardGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestGroup {
    pub name: String,
    pub gcs_prefix: String,
    pub column_header: Vec<ColumnHeader>,
    pub num_failures_to_alert: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnHeader {
    pub configuration_value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dashboard {
    pub name: String,
    pub dashboard_tab: Vec<DashboardTab>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardTab {
    pub name: String,
    pub test_group_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DashboardGroup {
    pub name: String,
    pub dashboard_names: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TestGridError {
    #[error("provider `{provider}` has a job with an empty name")]
    EmptyJobName { provider: String },
    #[error("provider `{provider}` has an empty dashboard name")]
    EmptyDashboardName { provider: String },
    #[error("the dashboard group name is empty")]
    EmptyDashboardGroupName,
    #[error("job `{job}` has gcs_prefix `{prefix}`: {reason}")]
    InvalidGcsPrefix { job: String, prefix: String, reason: &'static str },
    #[error(
        "test group `{name}` clashes with `{clashes_with}`: TestGrid needs test group names \
         unique once lower-cased and reduced to letters and digits"
    )]
    DuplicateTestGroup { name: String, clashes_with: String },
    #[error("tab `{tab}` of dashboard `{dashboard}` shows test group `{test_group}`, which is not defined")]
    UnknownTestGroup { dashboard: String, tab: String, test_group: String },
    #[error("serializing the TestGrid config: {0}")]
    Yaml(#[from] serde_yaml_ng::Error),
}

/// Builds and validates the TestGrid configuration for `input`, sorted by name throughout.
pub fn generate(input: &TestGridInput) -> Result<Configuration, TestGridError> {
    validate_input(input)?;
    let config = Configuration {
        test_groups: test_groups(&input.providers)?,
        dashboards: dashboards(&input.providers),
        dashboard_groups: dashboard_groups(input),
    };
    config.validate()?;
    Ok(config)
}

/// [`generate`], serialized as the YAML TestGrid's yamlcfg reads.
pub fn generate_yaml(input: &TestGridInput) -> Result<String, TestGridError> {
    generate(input)?.to_yaml()
}

impl Configuration {
    /// Checks that test group names are unique and that every tab shows a defined test group.
    pub fn validate(&self) -> Result<(), TestGridError> {
        self.check_unique_test_groups()?;
        self.check_tabs_reference_test_groups()
    }

    /// Validates, then serializes in field order.
    pub fn to_yaml(&self) -> Result<String, TestGridError> {
        self.validate()?;
        Ok(serde_yaml_ng::to_string(self)?)
    }

    fn check_unique_test_groups(&self) -> Result<(), TestGridError> {
        let mut seen: HashMap<String, &str> = HashMap::new();
        for group in &self.test_groups {
            if let Some(earlier) = seen.insert(normalize(&group.name), &group.name) {
                return Err(TestGridError::DuplicateTestGroup {
                    name: group.name.clone(),
                    clashes_with: earlier.to_owned(),
                });
            }
        }
        Ok(())
    }

    fn check_tabs_reference_test_groups(&self) -> Result<(), TestGridError> {
        let defined: HashSet<&str> = self.test_groups.iter().map(|g| g.name.as_str()).collect();
        for dashboard in &self.dashboards {
            let unknown = dashboard.dashboard_tab.iter().find(|tab| !defined.contains(tab.test_group_name.as_str()));
            if let Some(tab) = unknown {
                return Err(TestGridError::UnknownTestGroup {
                    dashboard: dashboard.name.clone(),
                    tab: tab.name.clone(),
                    test_group: tab.test_group_name.clone(),
                });
            }
        }
        Ok(())
    }
}

fn validate_input(input: &TestGridInput) -> Result<(), TestGridError> {
    if input.dashboard_group.as_deref().is_some_and(is_blank) {
        return Err(TestGridError::EmptyDashboardGroupName);
    }
    input.providers.iter().try_for_each(validate_provider)
}

fn validate_provider(provider: &Provider) -> Result<(), TestGridError> {
    let provider_name = || provider.name.clone();
    if is_blank(&provider.dashboard) || provider.jobs.iter().any(|job| job.dashboard.as_deref().is_some_and(is_blank)) {
        return Err(TestGridError::EmptyDashboardName { provider: provider_name() });
    }
    if provider.jobs.iter().any(|job| is_blank(&job.name)) {
        return Err(TestGridError::EmptyJobName { provider: provider_name() });
    }
    Ok(())
}

fn test_groups(providers: &[Provider]) -> Result<Vec<TestGroup>, TestGridError> {
    let mut groups = providers
        .iter()
        .flat_map(|provider| provider.jobs.iter().map(move |job| test_group(provider, job)))
        .collect::<Result<Vec<_>, _>>()?;
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(groups)
}

fn test_group(provider: &Provider, job: &Job) -> Result<TestGroup, TestGridError> {
    Ok(TestGroup {
        name: job.name.clone(),
        gcs_prefix: bucket_path(job)?,
        column_header: COLUMN_HEADER_KEYS
            .iter()
            .map(|key| ColumnHeader { configuration_value: (*key).to_owned() })
            .collect(),
        num_failures_to_alert: provider.num_failures_to_alert,
    })
}

/// The job's prefix as TestGrid wants it: `bucket/path`, no scheme, no trailing slash.
fn bucket_path(job: &Job) -> Result<String, TestGridError> {
    let prefix = job.gcs_prefix.as_str();
    let path = prefix.strip_prefix("gs://").unwrap_or(prefix).trim_end_matches('/');
    match gcs_path_problem(path) {
        None => Ok(path.to_owned()),
        Some(reason) => {
            Err(TestGridError::InvalidGcsPrefix { job: job.name.clone(), prefix: job.gcs_prefix.clone(), reason })
        }
    }
}

fn gcs_path_problem(path: &str) -> Option<&'static str> {
    if path.contains("://") {
        Some("TestGrid reads GCS only: give `bucket/path` or `gs://bucket/path`")
    } else if path.is_empty() {
        Some("it names no bucket")
    } else if path.starts_with('/') {
        Some("it must start with the bucket name, not `/`")
    } else {
        None
    }
}

fn dashboards(providers: &[Provider]) -> Vec<Dashboard> {
    let mut tabs_by_dashboard: BTreeMap<&str, Vec<DashboardTab>> = BTreeMap::new();
    for provider in providers {
        for job in &provider.jobs {
            tabs_by_dashboard.entry(job_dashboard(provider, job)).or_default().push(tab_for_job(job));
        }
    }
    tabs_by_dashboard
        .into_iter()
        .map(|(name, mut tabs)| {
            tabs.sort_by(|a, b| a.name.cmp(&b.name));
            Dashboard { name: name.to_owned(), dashboard_tab: tabs }
        })
        .collect()
}

fn job_dashboard<'a>(provider: &'a Provider, job: &'a Job) -> &'a str {
    job.dashboard.as_deref().unwrap_or(&provider.dashboard)
}

fn tab_for_job(job: &Job) -> DashboardTab {
    DashboardTab { name: job.name.clone(), test_group_name: job.name.clone() }
}

fn dashboard_groups(input: &TestGridInput) -> Vec<DashboardGroup> {
    let Some(group) = &input.dashboard_group else {
        return Vec::new();
    };
    let names: BTreeSet<&str> = input
        .providers
        .iter()
        .flat_map(|p| std::iter::once(p.dashboard.as_str()).chain(p.jobs.iter().map(|job| job_dashboard(p, job))))
        .collect();
    vec![DashboardGroup { name: group.clone(), dashboard_names: names.into_iter().map(str::to_owned).collect() }]
}

/// TestGrid's name normalisation: lower-cased, letters and digits only.
fn normalize(name: &str) -> String {
    name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

fn is_blank(name: &str) -> bool {
    normalize(name).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_yaml_ng::Value;

    fn job(name: &str, gcs_prefix: &str) -> Job {
        Job { name: name.to_owned(), gcs_prefix: gcs_prefix.to_owned(), dashboard: None }
    }

    fn provider(name: &str, dashboard: &str, jobs: Vec<Job>) -> Provider {
        Provider { name: name.to_owned(), dashboard: dashboard.to_owned(), num_failures_to_alert: 3, jobs }
    }

    fn two_providers_two_jobs() -> TestGridInput {
        let mut beta = provider(
            "beta",
            "provider-beta",
            vec![
                job("ci-beta-e2e", "gs://my-bucket/logs/ci-beta-e2e/"),
                job("ci-beta-conformance", "my-bucket/logs/ci-beta-conformance"),
            ],
        );
        beta.num_failures_to_alert = 5;
        let alpha = provider(
            "alpha",
            "provider-alpha",
            vec![
                job("ci-alpha-e2e", "my-bucket/logs/ci-alpha-e2e"),
                job("ci-alpha-conformance", "gs://my-bucket/logs/ci-alpha-conformance"),
            ],
        );
        TestGridInput { dashboard_group: Some("sig-cloud-provider-harness".to_owned()), providers: vec![beta, alpha] }
    }

    fn parse(yaml: &str) -> Value {
        serde_yaml_ng::from_str(yaml).expect("valid YAML")
    }

    #[test]
    fn two_providers_two_jobs_give_the_expected_testgrid_yaml() {
        let yaml = generate_yaml(&two_providers_two_jobs()).unwrap();
        let headers = "[{configuration_value: kubernetes-version}, {configuration_value: provider-version}]";
        let expected = format!(
            "
test_groups:
- {{name: ci-alpha-conformance, gcs_prefix: my-bucket/logs/ci-alpha-conformance, column_header: {headers}, num_failures_to_alert: 3}}
- {{name: ci-alpha-e2e, gcs_prefix: my-bucket/logs/ci-alpha-e2e, column_header: {headers}, num_failures_to_alert: 3}}
- {{name: ci-beta-conformance, gcs_prefix: my-bucket/logs/ci-beta-conformance, column_header: {headers}, num_failures_to_alert: 5}}
- {{name: ci-beta-e2e, gcs_prefix: my-bucket/logs/ci-beta-e2e, column_header: {headers}, num_failures_to_alert: 5}}
dashboards:
- name: provider-alpha
  dashboard_tab:
  - {{name: ci-alpha-conformance, test_group_name: ci-alpha-conformance}}
  - {{name: ci-alpha-e2e, test_group_name: ci-alpha-e2e}}
- name: provider-beta
  dashboard_tab:
  - {{name: ci-beta-conformance, test_group_name: ci-beta-conformance}}
  - {{name: ci-beta-e2e, test_group_name: ci-beta-e2e}}
dashboard_groups:
- {{name: sig-cloud-provider-harness, dashboard_names: [provider-alpha, provider-beta]}}
"
        );
        assert_eq!(parse(&yaml), parse(&expected));
    }

    #[test]
    fn top_level_keys_come_in_testgrid_order() {
        let yaml = generate_yaml(&two_providers_two_jobs()).unwrap();
        let Value::Mapping(top) = parse(&yaml) else { panic!("not a mapping: {yaml}") };
        let keys: Vec<_> = top.keys().filter_map(Value::as_str).collect();
        assert_eq!(keys, ["test_groups", "dashboards", "dashboard_groups"]);
    }

    #[test]
    fn output_does_not_depend_on_input_order() {
        let input = two_providers_two_jobs();
        let mut shuffled = input.clone();
        shuffled.providers.reverse();
        shuffled.providers.iter_mut().for_each(|p| p.jobs.reverse());
        let first = generate_yaml(&input).unwrap();
        assert_eq!(first, generate_yaml(&input).unwrap());
        assert_eq!(first, generate_yaml(&shuffled).unwrap());
    }

    #[test]
    fn exact_text_of_a_single_job_is_stable() {
        let input = TestGridInput {
            dashboard_group: None,
            providers: vec![provider("alpha", "provider-alpha", vec![job("ci-alpha-e2e", "b/logs/ci-alpha-e2e")])],
        };
        let expected = "\
test_groups:
- name: ci-alpha-e2e
  gcs_prefix: b/logs/ci-alpha-e2e
  column_header:
  - configuration_value: kubernetes-version
  - configuration_value: provider-version
  num_failures_to_alert: 3
dashboards:
- name: provider-alpha
  dashboard_tab:
  - name: ci-alpha-e2e
    test_group_name: ci-alpha-e2e
dashboard_groups: []
";
        assert_eq!(generate_yaml(&input).unwrap(), expected);
    }

    #[test]
    fn providers_sharing_a_dashboard_share_one_dashboard() {
        let mut input = two_providers_two_jobs();
        input.providers.iter_mut().for_each(|p| p.dashboard = "cloud-providers".to_owned());
        let config = generate(&input).unwrap();
        assert_eq!(config.dashboards.len(), 1);
        let tabs: Vec<_> = config.dashboards[0].dashboard_tab.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(tabs, ["ci-alpha-conformance", "ci-alpha-e2e", "ci-beta-conformance", "ci-beta-e2e"]);
        assert_eq!(config.dashboard_groups[0].dashboard_names, ["cloud-providers"]);
    }

    #[test]
    fn duplicate_job_names_across_providers_are_rejected() {
        let mut input = two_providers_two_jobs();
        input.providers[1].jobs[0].name = "ci-beta-e2e".to_owned();
        let err = generate(&input).unwrap_err();
        assert!(
            matches!(&err, TestGridError::DuplicateTestGroup { name, clashes_with }
                if name == "ci-beta-e2e" && clashes_with == "ci-beta-e2e"),
            "{err}"
        );
    }

    #[test]
    fn names_equal_once_normalised_are_duplicates_too() {
        let mut input = two_providers_two_jobs();
        input.providers[1].jobs[0].name = "CI_Beta_E2E".to_owned();
        let err = generate(&input).unwrap_err();
        assert!(
            matches!(&err, TestGridError::DuplicateTestGroup { name, clashes_with }
                if name == "ci-beta-e2e" && clashes_with == "CI_Beta_E2E"),
            "{err}"
        );
        assert!(err.to_string().contains("ci-beta-e2e"));
    }

    #[test]
    fn an_empty_job_name_names_its_provider() {
        let mut input = two_providers_two_jobs();
        input.providers[0].jobs[1].name = String::new();
        let err = generate(&input).unwrap_err();
        assert!(matches!(&err, TestGridError::EmptyJobName { provider } if provider == "beta"), "{err}");
        assert!(err.to_string().contains("`beta`"));
    }

    #[test]
    fn an_empty_dashboard_name_names_its_provider() {
        let mut input = two_providers_two_jobs();
        input.providers[1].dashboard = " ".to_owned();
        let err = generate(&input).unwrap_err();
        assert!(matches!(&err, TestGridError::EmptyDashboardName { provider } if provider == "alpha"), "{err}");
    }

    #[test]
    fn an_empty_dashboard_group_name_is_rejected() {
        let mut input = two_providers_two_jobs();
        input.dashboard_group = Some(String::new());
        assert!(matches!(generate(&input), Err(TestGridError::EmptyDashboardGroupName)));
    }

    #[test]
    fn a_gcs_prefix_with_another_scheme_is_rejected() {
        let mut input = two_providers_two_jobs();
        input.providers[1].jobs[0].gcs_prefix = "s3://my-bucket/logs/ci-alpha-e2e".to_owned();
        let err = generate(&input).unwrap_err();
        assert!(
            matches!(&err, TestGridError::InvalidGcsPrefix { job, prefix, .. }
                if job == "ci-alpha-e2e" && prefix == "s3://my-bucket/logs/ci-alpha-e2e"),
            "{err}"
        );
    }

    #[test]
    fn a_gcs_prefix_without_a_bucket_is_rejected() {
        for prefix in ["", "gs://", "gs:///logs/job", "/logs/job"] {
            let mut input = two_providers_two_jobs();
            input.providers[0].jobs[0].gcs_prefix = prefix.to_owned();
            let err = generate(&input).unwrap_err();
            assert!(
                matches!(&err, TestGridError::InvalidGcsPrefix { job, .. } if job == "ci-beta-e2e"),
                "{prefix:?}: {err}"
            );
        }
    }

    #[test]
    fn a_tab_showing_an_unknown_test_group_is_rejected() {
        let mut config = generate(&two_providers_two_jobs()).unwrap();
        config.dashboards[1]
            .dashboard_tab
            .push(DashboardTab { name: "extra".to_owned(), test_group_name: "ci-gamma-e2e".to_owned() });
        let err = config.to_yaml().unwrap_err();
        assert!(
            matches!(&err, TestGridError::UnknownTestGroup { dashboard, tab, test_group }
                if dashboard == "provider-beta" && tab == "extra" && test_group == "ci-gamma-e2e"),
            "{err}"
        );
    }

    #[test]
    fn generated_yaml_reads_back_into_the_same_configuration() {
        let config = generate(&two_providers_two_jobs()).unwrap();
        let read: Configuration = serde_yaml_ng::from_str(&config.to_yaml().unwrap()).unwrap();
        assert_eq!(read, config);
    }
}
