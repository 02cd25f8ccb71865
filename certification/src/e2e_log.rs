//! `e2e.log`: ginkgo's whole output. What the checks read in it: the `e2e test version: vX.Y.Z`
//! line `e2e.test` logs in its suite setup (in the output only when ginkgo runs verbose), and the
//! summary at the end: `Ran N of M Specs in ...` then `SUCCESS! -- N Passed | 0 Failed | 0 Pending
//! | K Skipped`.

use std::io::BufRead;
use std::sync::LazyLock;

use regex::Regex;

use crate::conformance_list::Minor;

/// The submission checks' pattern for the version line.
static VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^.*e2e test version: (v1\.[0-9]{2}(\.[0-9]{1,2})?)$").expect("valid"));
static RAN: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^Ran (\d+) of (\d+) Specs in ").expect("valid"));
static OUTCOME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(SUCCESS!|FAIL!) -- (\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped").expect("valid")
});

/// The summary ginkgo printed last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub ran: u32,
    pub total: u32,
    pub success: bool,
    pub passed: u32,
    pub failed: u32,
    pub pending: u32,
    pub skipped: u32,
}

/// What the log says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct E2eLog {
    /// The first `e2e test version:` value (`v1.37.1`).
    pub version: Option<String>,
    /// The last `Ran ...` line with the outcome line after it.
    pub summary: Option<Summary>,
}

impl E2eLog {
    /// The minor of [`E2eLog::version`].
    pub fn minor(&self) -> Option<Minor> {
        self.version.as_deref().and_then(|v| v.parse().ok())
    }
}

/// Reads the log line by line (it runs to tens of megabytes); bytes that are not UTF-8 are kept
/// as replacement characters.
pub fn scan(mut input: impl BufRead) -> std::io::Result<E2eLog> {
    let mut log = E2eLog::default();
    let mut ran: Option<(u32, u32)> = None;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            return Ok(log);
        }
        let text = String::from_utf8_lossy(&buf);
        let line = text.trim_end_matches(['\n', '\r']);
        if log.version.is_none()
            && let Some(found) = VERSION.captures(line)
        {
            log.version = Some(found[1].to_owned());
        }
        let trimmed = line.trim_start();
        if let Some(found) = RAN.captures(trimmed) {
            ran = Some((found[1].parse().unwrap_or(0), found[2].parse().unwrap_or(0)));
        } else if let (Some((ran, total)), Some(found)) = (ran, OUTCOME.captures(trimmed)) {
            let number = |i: usize| found[i].parse().unwrap_or(0);
            log.summary = Some(Summary {
                ran,
                total,
                success: &found[1] == "SUCCESS!",
                passed: number(2),
                failed: number(3),
                pending: number(4),
                skipped: number(5),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_text(text: &str) -> E2eLog {
        scan(text.as_bytes()).unwrap()
    }

    #[test]
    fn finds_the_version_and_the_summary() {
        let log = scan_text(
            "  I1127 10:00:00.000000 1 e2e.go:109] Starting e2e run\n\
             Nov 27 10:00:01.000: INFO: e2e test version: v1.37.1\n\
             ...\n\
             Ran 462 of 7031 Specs in 2759.004 seconds\n\
             SUCCESS! -- 462 Passed | 0 Failed | 0 Pending | 6569 Skipped\n\
             \n\
             Ginkgo ran 1 suite in 46m5s\n\
             Test Suite Passed\n",
        );
        assert_eq!(log.version.as_deref(), Some("v1.37.1"));
        assert_eq!(log.minor().unwrap().to_string(), "v1.37");
        let summary = log.summary.unwrap();
        assert!(summary.success);
        assert_eq!(
            (summary.ran, summary.total, summary.passed, summary.failed, summary.skipped),
            (462, 7031, 462, 0, 6569)
        );
    }

    #[test]
    fn a_failed_run_and_a_missing_version_are_seen() {
        let log = scan_text("Ran 3 of 9 Specs in 1.0 seconds\nFAIL! -- 2 Passed | 1 Failed | 0 Pending | 6 Skipped\n");
        assert_eq!(log.version, None);
        let summary = log.summary.unwrap();
        assert!(!summary.success);
        assert_eq!(summary.failed, 1);
    }

    #[test]
    fn the_version_line_must_end_with_the_version() {
        assert_eq!(scan_text("e2e test version: v1.37.1 (dirty)\n").version, None);
        assert_eq!(scan_text("INFO: e2e test version: v1.36\r\n").version.as_deref(), Some("v1.36"));
    }
}
