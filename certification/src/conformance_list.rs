//! The conformance tests a release requires: the list `e2e.test --list-conformance-tests` prints,
//! which is the release branch's `test/conformance/testdata/conformance.yaml`.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

/// A Kubernetes minor release, `v1.37` (a patch, `v1.37.1`, is read and dropped; the `v` may be
/// left out, as some entries of the real conformance lists do: `release: 1.25`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Minor {
    pub major: u32,
    pub minor: u32,
}

impl Minor {
    /// The release `n` minors before this one (`v1.37` − 2 = `v1.35`).
    pub fn minus(self, n: u32) -> Minor {
        Minor { major: self.major, minor: self.minor.saturating_sub(n) }
    }
}

impl fmt::Display for Minor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

impl FromStr for Minor {
    type Err = String;

    fn from_str(text: &str) -> Result<Minor, String> {
        let bad = || format!("`{text}` is not a Kubernetes release (vMAJOR.MINOR, e.g. v1.37)");
        let trimmed = text.trim();
        let digits = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let mut parts = digits.split('.');
        let mut number = || parts.next().and_then(|p| p.parse::<u32>().ok()).ok_or_else(bad);
        let (major, minor) = (number()?, number()?);
        // A patch (and a pre-release after it) may follow.
        Ok(Minor { major, minor })
    }
}

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceTest {
    /// The test's full name as the JUnit has it after `[It] `.
    pub codename: String,
    /// The releases it was added or changed in (`v1.9, v1.18`).
    pub releases: Vec<Minor>,
}

impl ConformanceTest {
    /// Whether a submission for `release` must hold it: one of its releases is ≤ `release`.
    pub fn required_for(&self, release: Minor) -> bool {
        self.releases.iter().any(|r| *r <= release)
    }
}

#[derive(Debug, Deserialize)]
struct RawEntry {
    codename: String,
    release: String,
}

/// Reads the list; every entry must have a `codename` and a `release`.
pub fn parse(text: &str) -> Result<Vec<ConformanceTest>, String> {
    let raw: Vec<RawEntry> = serde_yaml_ng::from_str(text).map_err(|e| format!("not a conformance test list: {e}"))?;
    raw.into_iter()
        .map(|entry| {
            let releases = entry
                .release
                .split(',')
                .map(str::parse)
                .collect::<Result<Vec<Minor>, _>>()
                .map_err(|e| format!("test `{}`: release {e}", entry.codename))?;
            Ok(ConformanceTest { codename: entry.codename, releases })
        })
        .collect()
}

/// The names a submission for `release` must pass.
pub fn required(tests: &[ConformanceTest], release: Minor) -> Vec<&str> {
    tests.iter().filter(|t| t.required_for(release)).map(|t| t.codename.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"
- testname: Pods, lifecycle
  codename: '[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]'
  description: ' A Pod is created ...'
  release: v1.9, v1.18
  file: test/e2e/common/node/pods.go
- testname: New in 1.37
  codename: '[sig-apps] something new [Conformance]'
  description: x
  release: v1.37
  file: test/e2e/apps/new.go
"#;

    #[test]
    fn minors_read_with_or_without_a_patch() {
        assert_eq!("v1.37".parse::<Minor>(), Ok(Minor { major: 1, minor: 37 }));
        assert_eq!("v1.36.4".parse::<Minor>(), Ok(Minor { major: 1, minor: 36 }));
        assert_eq!(" v1.9".parse::<Minor>(), Ok(Minor { major: 1, minor: 9 }));
        assert_eq!("1.25".parse::<Minor>(), Ok(Minor { major: 1, minor: 25 }));
        assert!("v1".parse::<Minor>().is_err() && "x1.2".parse::<Minor>().is_err());
        assert!("v1".parse::<Minor>().is_err());
        assert_eq!(Minor { major: 1, minor: 37 }.minus(2).to_string(), "v1.35");
    }

    #[test]
    fn a_test_is_required_from_its_first_release_on() {
        let tests = parse(LIST).unwrap();
        assert_eq!(tests[0].releases.len(), 2);
        assert_eq!(required(&tests, "v1.36".parse().unwrap()).len(), 1);
        assert_eq!(required(&tests, "v1.37".parse().unwrap()).len(), 2);
        assert_eq!(required(&tests, "v1.8".parse().unwrap()).len(), 0);
    }

    #[test]
    fn a_bad_release_names_its_test() {
        let err = parse("- codename: x\n  release: v1.9, next\n").unwrap_err();
        assert!(err.contains("test `x`") && err.contains("` next`"), "{err}");
    }
}
