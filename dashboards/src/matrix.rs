//! The home page's matrix: providers × Kubernetes minor versions, each cell the latest finished
//! build there and the pass rate of all of them. Pure: built from plain rows the harness reads from
//! its index.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A finished build that names its provider and Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixBuild {
    pub provider: String,
    pub job: String,
    pub build: String,
    pub kubernetes_version: String,
    pub provider_version: Option<String>,
    pub started_at: i64,
    /// `None` when finished.json said neither (an aborted build, say): counted as not passed.
    pub passed: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    /// Column headers, newest minor first: `1.37`, `1.36`, ... and `other` for versions that are
    /// not `[v]MAJOR.MINOR...` (a bare commit).
    pub minors: Vec<String>,
    /// One row per provider, by name.
    pub rows: Vec<MatrixRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixRow {
    pub provider: String,
    /// One per minor, in `minors`' order; `None` where the provider never ran that minor.
    pub cells: Vec<Option<MatrixCell>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixCell {
    /// The newest build in the cell.
    pub latest: MatrixBuild,
    pub passed: usize,
    pub builds: usize,
}

impl MatrixCell {
    /// Passed builds over all builds, 0.0–1.0.
    pub fn pass_rate(&self) -> f64 {
        self.passed as f64 / self.builds as f64
    }

    /// How many minors the latest build's CCM release is behind (negative: ahead of) its
    /// Kubernetes version, when both are release tags (`v1.36.0` on `v1.37.1`: 1); `None` for a
    /// commit, which has no minor.
    pub fn version_skew(&self) -> Option<i64> {
        let minor = |version: &str| -> Option<i64> { minor_of(version)?.split_once('.')?.1.parse().ok() };
        let ccm = minor(self.latest.provider_version.as_deref()?)?;
        Some(minor(&self.latest.kubernetes_version)? - ccm)
    }
}

/// `1.37` for `v1.37.1`, `1.37.0-alpha.2.15+abc` or `1.37`; `None` for anything else.
pub fn minor_of(version: &str) -> Option<String> {
    let version = version.strip_prefix('v').unwrap_or(version);
    let mut parts = version.splitn(3, ['.', '-', '+']);
    let major = parts.next().filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?;
    let minor = parts.next().filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))?;
    Some(format!("{major}.{minor}"))
}

/// The `(major, minor)` a header sorts by; `other` last.
pub(crate) fn sort_key(minor: &str) -> (u64, u64) {
    let (major, minor) = minor.split_once('.').unwrap_or(("0", "0"));
    (major.parse().unwrap_or(0), minor.parse().unwrap_or(0))
}

pub(crate) const OTHER: &str = "other";

impl Matrix {
    pub fn new(builds: Vec<MatrixBuild>) -> Matrix {
        let mut cells: BTreeMap<(String, String), MatrixCell> = BTreeMap::new();
        for build in builds {
            let minor = minor_of(&build.kubernetes_version).unwrap_or_else(|| OTHER.to_owned());
            let passed = usize::from(build.passed == Some(true));
            let key = (build.provider.clone(), minor);
            match cells.get_mut(&key) {
                Some(cell) => {
                    cell.passed += passed;
                    cell.builds += 1;
                    if (build.started_at, &build.build) > (cell.latest.started_at, &cell.latest.build) {
                        cell.latest = build;
                    }
                }
                None => {
                    cells.insert(key, MatrixCell { latest: build, passed, builds: 1 });
                }
            }
        }
        let mut minors: Vec<String> = cells.keys().map(|(_, minor)| minor.clone()).collect();
        minors.sort_by_key(|minor| std::cmp::Reverse((minor != OTHER, sort_key(minor))));
        minors.dedup();
        let mut rows: Vec<MatrixRow> = Vec::new();
        for ((provider, minor), cell) in cells {
            if rows.last().is_none_or(|row| row.provider != provider) {
                rows.push(MatrixRow { provider: provider.clone(), cells: vec![None; minors.len()] });
            }
            let column = minors.iter().position(|m| *m == minor).expect("every minor is a column");
            rows.last_mut().expect("pushed above").cells[column] = Some(cell);
        }
        Matrix { minors, rows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(provider: &str, build: &str, kubernetes: &str, started_at: i64, passed: bool) -> MatrixBuild {
        MatrixBuild {
            provider: provider.into(),
            job: format!("ci-{provider}"),
            build: build.into(),
            kubernetes_version: kubernetes.into(),
            provider_version: None,
            started_at,
            passed: Some(passed),
        }
    }

    #[test]
    fn a_cell_knows_how_far_its_ccm_release_is_behind_its_kubernetes() {
        let cell = |provider_version: Option<&str>, kubernetes: &str| MatrixCell {
            latest: MatrixBuild {
                provider_version: provider_version.map(str::to_owned),
                ..build("p", "1", kubernetes, 1, true)
            },
            passed: 1,
            builds: 1,
        };
        assert_eq!(cell(Some("v1.36.0"), "v1.37.1").version_skew(), Some(1));
        assert_eq!(cell(Some("v1.37.1"), "v1.37.1").version_skew(), Some(0));
        assert_eq!(cell(Some("0123456789abcdef0123456789abcdef01234567"), "v1.37.1").version_skew(), None);
        assert_eq!(cell(None, "v1.37.1").version_skew(), None);
    }

    #[test]
    fn minors_are_read_from_tags_and_describe_versions_and_nothing_else() {
        assert_eq!(minor_of("v1.37.1").as_deref(), Some("1.37"));
        assert_eq!(minor_of("1.36.0-alpha.2.15+0123abcd").as_deref(), Some("1.36"));
        assert_eq!(minor_of("v1.35").as_deref(), Some("1.35"));
        assert_eq!(minor_of("0123456789abcdef0123456789abcdef01234567"), None);
        assert_eq!(minor_of("v1"), None);
    }

    #[test]
    fn each_cell_holds_the_newest_build_and_the_pass_rate_of_all_of_them() {
        let matrix = Matrix::new(vec![
            build("aws", "1", "v1.36.4", 10, true),
            build("aws", "2", "v1.37.1", 20, false),
            build("aws", "3", "v1.37.0", 30, true),
            build("aws", "4", "v1.37.1", 25, true),
            build("local", "9", "0123456789abcdef0123456789abcdef01234567", 5, true),
            build("local", "8", "v1.9.2", 5, true),
        ]);
        assert_eq!(matrix.minors, ["1.37", "1.36", "1.9", "other"], "newest first, numerically, other last");
        assert_eq!(matrix.rows.iter().map(|r| r.provider.as_str()).collect::<Vec<_>>(), ["aws", "local"]);
        let aws_137 = matrix.rows[0].cells[0].as_ref().unwrap();
        assert_eq!((aws_137.latest.build.as_str(), aws_137.passed, aws_137.builds), ("3", 2, 3));
        assert!((aws_137.pass_rate() - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(matrix.rows[0].cells[2], None, "aws never ran 1.9");
        assert_eq!(matrix.rows[1].cells[3].as_ref().unwrap().latest.build, "9");
    }
}
