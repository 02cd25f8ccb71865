//! What TestGrid shows for a test group: `tools/testing/testgrid-read` runs TestGrid's own updater
//! (github.com/GoogleCloudPlatform/testgrid pkg/updater) against the emulator and prints the grid
//! state it wrote, which [`read_grid`] deserialises.
//!
//! TestGrid's rules, as that code applies them (see tools/testing/README.md):
//! - Columns are builds (directories under `gcs_prefix`), newest `started` first; `extra` holds one
//!   value per `column_header`, taken from finished.json `metadata` string values ("missing" when
//!   absent in a finished build, "" while running).
//! - Rows are `<testsuite name>.<testcase name>` from every `junit*.xml` (or `test.xml`) anywhere
//!   under the build, plus `<job>.Overall` (from finished.json `passed`) and `<job>.Pod` (from
//!   podinfo.json, unless `disable_prowjob_analysis`).
//! - A build without finished.json is RUNNING ("Build still running...") for 24 hours after its
//!   start, then FAIL ("Build did not complete within 24 hours").

use std::path::PathBuf;
use std::process::Command;

use serde::Deserialize;

use crate::go_tools::go_tool;

#[derive(Debug, Clone, Deserialize)]
pub struct Grid {
    pub name: String,
    /// Newest first.
    pub columns: Vec<Column>,
    /// In TestGrid's (natural) name order.
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Column {
    /// The build id (the build directory's name).
    pub build: String,
    pub name: String,
    /// started.json `timestamp`, in epoch milliseconds.
    pub started_ms: f64,
    /// One value per column header, in order.
    pub extra: Vec<String>,
    pub hint: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    pub name: String,
    pub id: String,
    /// One per column: TestGrid `TestStatus` names (PASS, FAIL, FLAKY, PASS_WITH_SKIPS, RUNNING,
    /// UNKNOWN, NO_RESULT where the row has no cell in that column, ...).
    pub results: Vec<String>,
    /// One per column, "" where none.
    pub messages: Vec<String>,
    /// One per column, "" where none.
    pub icons: Vec<String>,
    /// Set when the group has `num_failures_to_alert` and the row alerts.
    pub alert: Option<Alert>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Alert {
    pub fail_count: i32,
    pub fail_build_id: String,
    pub latest_fail_build_id: String,
    pub pass_build_id: String,
    pub failure_message: String,
}

impl Grid {
    /// The row named `name`; panics listing the rows there are.
    pub fn row(&self, name: &str) -> &Row {
        self.rows.iter().find(|r| r.name == name).unwrap_or_else(|| {
            let names: Vec<&str> = self.rows.iter().map(|r| r.name.as_str()).collect();
            panic!("no row {name:?} in test group {}; rows: {names:#?}", self.name)
        })
    }

    /// The index of build `build`'s column; panics listing the builds there are.
    pub fn column_index(&self, build: &str) -> usize {
        self.columns.iter().position(|c| c.build == build).unwrap_or_else(|| {
            let builds: Vec<&str> = self.columns.iter().map(|c| c.build.as_str()).collect();
            panic!("no column for build {build:?} in test group {}; builds: {builds:?}", self.name)
        })
    }

    pub fn column(&self, build: &str) -> &Column {
        &self.columns[self.column_index(build)]
    }

    /// Row `row`'s result in build `build`.
    pub fn result(&self, row: &str, build: &str) -> &str {
        &self.row(row).results[self.column_index(build)]
    }

    /// Row `row`'s message in build `build`.
    pub fn message(&self, row: &str, build: &str) -> &str {
        &self.row(row).messages[self.column_index(build)]
    }
}

/// The grid TestGrid shows for the builds under `gcs_prefix` (`bucket/logs/<job>`), with these
/// `column_header` configuration values; see [`ReadGrid`] for the defaults.
pub fn read_grid(emulator_host: &str, gcs_prefix: &str, column_headers: &[&str]) -> Grid {
    ReadGrid::new(gcs_prefix).column_headers(column_headers).run(emulator_host)
}

/// A testgrid-read run. The test group is named after the job (the last element of the prefix)
/// unless [`ReadGrid::name`]; its grid state is kept in the prefix's bucket under
/// `testgrid-read/`, and a later run updates it incrementally as TestGrid's updater does.
#[derive(Debug, Clone)]
pub struct ReadGrid {
    pub gcs_prefix: String,
    pub column_headers: Vec<String>,
    pub name: Option<String>,
    /// Overrides the group's `days_of_results`. Defaults to 36500 so fixtures with fixed past
    /// timestamps are read; `None` keeps TestGrid's default of 7 days, past which a build shows as
    /// an UNKNOWN "build too old" column with a single `Overall` row.
    pub days_of_results: Option<u32>,
    pub num_failures_to_alert: u32,
    pub disable_prowjob_analysis: bool,
    /// A TestGrid YAML config (test_groups, dashboards) to use instead of the fields above; it is
    /// converted and validated with TestGrid's own code. `name` picks the group if it has several.
    pub config_yaml: Option<PathBuf>,
    /// Drop the grid state of an earlier run first.
    pub fresh: bool,
}

impl ReadGrid {
    pub fn new(gcs_prefix: &str) -> ReadGrid {
        ReadGrid {
            gcs_prefix: gcs_prefix.to_string(),
            column_headers: Vec::new(),
            name: None,
            days_of_results: Some(36500),
            num_failures_to_alert: 0,
            disable_prowjob_analysis: false,
            config_yaml: None,
            fresh: false,
        }
    }

    pub fn column_headers(mut self, headers: &[&str]) -> ReadGrid {
        self.column_headers = headers.iter().map(|h| h.to_string()).collect();
        self
    }

    /// Runs testgrid-read against the emulator at `emulator_host`; panics with its log on failure.
    pub fn run(&self, emulator_host: &str) -> Grid {
        let bin = go_tool("testgrid-read");
        let mut cmd = Command::new(&bin);
        cmd.env("STORAGE_EMULATOR_HOST", emulator_host);
        if let Some(config) = &self.config_yaml {
            cmd.arg("--config-yaml").arg(config);
        } else {
            cmd.args(["--gcs-prefix", &self.gcs_prefix]);
            for header in &self.column_headers {
                cmd.args(["--column-header", header]);
            }
            cmd.arg(format!("--num-failures-to-alert={}", self.num_failures_to_alert));
            cmd.arg(format!("--disable-prowjob-analysis={}", self.disable_prowjob_analysis));
        }
        if let Some(name) = &self.name {
            cmd.args(["--name", name]);
        }
        if let Some(days) = self.days_of_results {
            cmd.arg(format!("--days-of-results={days}"));
        }
        if self.fresh {
            cmd.arg("--fresh");
        }
        let output = cmd.output().unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "testgrid-read {:?} failed ({}):\n{stderr}",
            cmd.get_args().collect::<Vec<_>>(),
            output.status
        );
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("testgrid-read printed no grid ({e}):\n{}\n{stderr}", String::from_utf8_lossy(&output.stdout))
        })
    }
}
