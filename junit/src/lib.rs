//! The project's one JUnit model, a streaming reader for the files real runners write, and a writer.
//!
//! # Shapes read
//! - ginkgo v1 `junit_01.xml` (Kubernetes `e2e.test`, older certified conformance results): a
//!   `<testsuite>` root, hundreds of `<testcase>`s, most `<skipped>`; a spec retried with
//!   `--flakeAttempts` appears as several `<testcase>`s with the same name, one right after the
//!   other, and distinct specs can share a name too (see below).
//! - ginkgo v2: `<testsuites>` root, suite `<properties>`, `status="passed|failed|skipped|pending|…"`
//!   on each `<testcase>`, large `<system-err>`. A spec that passed on a retry keeps
//!   `status="passed"` and only says `Attempt #N Failed.  Retrying` in its output: each such marker
//!   becomes a failed attempt.
//! - kubetest2 `junit_runner.xml`: a `<testsuite>` root with one case per step.
//! - pytest: `<testsuites>` → `<testsuite>`, `<error>` for setup/teardown errors, `<skipped>` for
//!   skip and xfail, `<properties>` inside a `<testcase>`.
//! - cargo-nextest: `<flakyFailure>`/`<flakyError>` (failed attempts before the final pass) and
//!   `<rerunFailure>`/`<rerunError>` (failed retries after the first failure), each with its own
//!   `<system-out>`/`<system-err>`.
//!
//! # Model
//! A [`Report`] holds [`Suite`]s (nested suites are flattened, parent first); a [`TestCase`] holds
//! its [`Attempt`]s in the order they ran. Its [`Status`] follows from them: the last attempt that
//! was not skipped decides, and a pass after a failure is [`Status::Flaky`] (counted as passed, and
//! reported).
//!
//! # Repeated test cases: retries, and same-named cases
//! A `<testcase>` with the same classname and name as the one right before it in its suite is a
//! *retry* of it, and becomes further attempts of that case, only when that attempt failed or
//! errored and the repeat ran (was not skipped): that is how ginkgo v1 writes a spec retried with
//! `--flakeAttempts` (its `SpecRunner.runSpec` reports every attempt as it ends, and the JUnit
//! reporter adds a `<testcase>` per report, so each retry directly follows the failed attempt).
//! Retry elements (`<flakyFailure>`, `<rerunFailure>`, …) and ginkgo v2's `Failed.  Retrying`
//! markers are attempts of their own `<testcase>` as before.
//!
//! Every other repeat is a case of its own: two passes, a pass then a failure, two skips, a repeat
//! after a skip, and a failure then a pass of the same name with other cases in between. Real
//! files hold such cases: ginkgo v1 conformance results where the secret, configMap and
//! downwardAPI specs of one `Projected` describe share a name (v1.7, v1.8; never next to each
//! other), the two `[ReportBeforeSuite]` nodes of a ginkgo v2 suite, skipped pairs. Reading a
//! failure of one such spec as a flake of the other would call a failed run good, and which spec
//! came first would decide it. (A failure followed *directly* by a passing same-named case cannot
//! be told from a retry; it is read as one.)
//!
//! Such cases are named as TestGrid's updater names the rows of a build when it keeps same-named
//! results apart (`disable_merged_status`, `SplitCells` in `pkg/updater`): in document order, `name`,
//! `name [1]`, `name [2]`, …, counting every `<testcase>` TestGrid shows, so a retried case takes
//! the number of its first attempt and its retries use up the next ones; cases TestGrid leaves out
//! (a `<skipped>` with no text and no message but "skipped") take the numbers after those. A name
//! that appears once is left alone. By default TestGrid instead merges same-named results into
//! one row (FLAKY when some passed and some failed, in either order); `tests/data/junit/README.md`
//! says where the two differ and the workspace's `tests/testgrid_parity.rs` compares both with TestGrid's own code.
//!
//! # Reading: streaming, bounded, refusing what is dangerous
//! The reader drives quick-xml's event reader and never builds a tree of the file. Character data
//! (`<system-out>`, `<system-err>`, failure bodies, and any stray text) is streamed straight from
//! the input: at most [`ReadOptions::max_text_bytes`] of each field is kept and the rest only
//! counted ([`Output::dropped_bytes`]), so a 500 MB `system-out` costs a bounded amount of memory.
//! (CDATA sections are the exception: quick-xml hands each one over whole; the file size limit
//! bounds them.) A file above [`ReadOptions::max_file_bytes`] is refused before it is read.
//! quick-xml never expands entities itself: a `DOCTYPE` arrives as one event and `&name;` as a
//! reference the caller resolves. We refuse any `DOCTYPE` (JUnit has no DTD, and entity
//! declarations are how "billion laughs" bombs work) and resolve only XML's predefined entities
//! and character references; anything else is an error naming the file and position.
//! Elements nested deeper than [`ReadOptions::max_depth`] (64 by default; real JUnit files nest
//! three to five levels) are refused with [`JunitError::TooDeep`]. The reader keeps its own stack
//! of open suites instead of recursing, so no input, however deep, can overflow the call stack;
//! the limit bounds what a hostile file costs in the XML parser's stack of open element names.
//!
//! # Why not `junit-report` or `quick-junit`
//! Both were tried (in a scratch crate, 2026-11) on the real files under `tests/data/junit/`:
//! - `junit-report` 0.9.1 only writes; it cannot read any of them. Its writer also adds
//!   `id`/`package`/`hostname="localhost"` attributes we would not want to publish.
//! - `quick-junit` 0.8.0 (nextest's) reads and writes, and is the right shape for nextest's retry
//!   elements, but its reader (documented as experimental) rejected 3 of the 6 files: both
//!   `<testsuite>`-rooted ones (ginkgo v1 `junit_01.xml` and kubetest2 `junit_runner.xml`:
//!   "missing <testsuites> element") and ginkgo v2's (`timestamp` without a UTC offset). It read
//!   pytest's file with `tests=0`, since it trusts the count attributes. It also builds the whole
//!   report with every output in memory, has no size limit, and has no notion of the same test
//!   case appearing twice (ginkgo's retries, or same-named specs).
//!
//! So the project keeps this one model and reads and writes it with quick-xml (the parser both
//! crates use) directly. The writer emits nextest's retry elements, which TestGrid ignores (a flaky
//! case shows as passed there) and which this reader turns back into the same attempts.
//!
//! [`Counts`] are of test cases; on a file without retries they equal TestGrid's rows for it (with
//! `disable_merged_status`), plus the cases TestGrid leaves out as skipped without a reason.

mod reader;
#[cfg(test)]
mod tests;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};

pub use reader::{read_bytes, read_file, read_from};
pub use writer::{to_string, write, write_file};

/// One JUnit file: its suites in document order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// `<testsuites name>`, when the root had one.
    pub name: Option<String>,
    pub suites: Vec<Suite>,
}

/// A `<testsuite>`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Suite {
    pub name: String,
    pub timestamp: Option<String>,
    /// Seconds, as the `time` attribute said.
    pub time: Option<f64>,
    pub properties: Vec<Property>,
    pub cases: Vec<TestCase>,
    pub system_out: Option<Output>,
    pub system_err: Option<Output>,
}

/// A `<property name value>`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Property {
    pub name: String,
    pub value: String,
}

/// A test with every attempt that ran it. The reader names same-named `<testcase>`s of a suite
/// that are not retries `name`, `name [1]`, … as TestGrid does (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TestCase {
    pub name: String,
    pub classname: Option<String>,
    pub properties: Vec<Property>,
    /// In the order they ran; never empty for a case the reader produced.
    pub attempts: Vec<Attempt>,
}

/// One run of a test case.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attempt {
    pub outcome: Outcome,
    /// Seconds.
    pub time: Option<f64>,
    pub timestamp: Option<String>,
    /// The `<failure>`, `<error>` or `<skipped>` (or retry element) that described this attempt.
    pub detail: Option<Detail>,
    pub system_out: Option<Output>,
    pub system_err: Option<Output>,
}

/// What one attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outcome {
    #[default]
    Passed,
    Failed,
    Error,
    Skipped,
}

/// A test case's result over all its attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    Error,
    Skipped,
    /// Failed (or errored), then passed on a retry.
    Flaky,
}

/// The `message` and `type` attributes and the text of a failure, error or skip element.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Detail {
    pub message: Option<String>,
    pub kind: Option<String>,
    pub text: Output,
}

/// Character data read under a size cap.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// The first bytes of the text (at most the cap), entities resolved.
    pub text: String,
    /// How many bytes of the raw text were past the cap and not kept.
    pub dropped_bytes: u64,
}

/// Tallies of test cases by [`Status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    pub errors: usize,
    pub skipped: usize,
    pub flaky: usize,
}

/// Limits the reader enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// A larger file is refused with [`JunitError::TooLarge`] before any of it is parsed.
    pub max_file_bytes: u64,
    /// Each text field keeps at most this many bytes; the rest is counted and dropped.
    pub max_text_bytes: usize,
    /// Elements nested deeper than this (the root element is 1 deep) are refused with
    /// [`JunitError::TooDeep`].
    pub max_depth: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self { max_file_bytes: 512 * 1024 * 1024, max_text_bytes: 64 * 1024, max_depth: 64 }
    }
}

/// Where in a file something went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Byte offset from the start of the input.
    pub offset: u64,
    /// 1-based line and column (in bytes), when the input could be scanned again (a file).
    pub line_column: Option<(u64, u64)>,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line_column {
            Some((line, column)) => write!(f, "line {line}, column {column} (byte {})", self.offset),
            None => write!(f, "byte {}", self.offset),
        }
    }
}

/// Why a JUnit file could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum JunitError {
    #[error("{file}: cannot read: {source}")]
    Io { file: PathBuf, source: std::io::Error },
    #[error("{file}: larger than the {limit}-byte limit for a JUnit file{}", size_note(.size))]
    TooLarge { file: PathBuf, size: Option<u64>, limit: u64 },
    #[error("{file}: no root element (empty file)")]
    Empty { file: PathBuf },
    #[error("{file} at {at}: malformed XML: {source}")]
    Malformed { file: PathBuf, at: Position, source: quick_xml::Error },
    #[error("{file} at {at}: truncated: the file ends inside <{open}>")]
    Truncated { file: PathBuf, at: Position, open: String },
    #[error("{file} at {at}: root element is <{found}>; a JUnit file starts with <testsuites> or <testsuite>")]
    WrongRoot { file: PathBuf, at: Position, found: String },
    #[error(
        "{file} at {at}: DOCTYPE refused: JUnit has no DTD, and entity declarations can expand without bound (XML entity bomb)"
    )]
    Doctype { file: PathBuf, at: Position },
    #[error(
        "{file} at {at}: elements nested more than {limit} deep: JUnit files nest only a few levels (testsuites > testsuite > testcase > failure), so this is not one a test runner wrote"
    )]
    TooDeep { file: PathBuf, at: Position, limit: usize },
}

fn size_note(size: &Option<u64>) -> String {
    size.map(|s| format!(" ({s} bytes)")).unwrap_or_default()
}

impl JunitError {
    /// The file the error is about.
    pub fn file(&self) -> &Path {
        match self {
            Self::Io { file, .. }
            | Self::TooLarge { file, .. }
            | Self::Empty { file }
            | Self::Malformed { file, .. }
            | Self::Truncated { file, .. }
            | Self::WrongRoot { file, .. }
            | Self::Doctype { file, .. }
            | Self::TooDeep { file, .. } => file,
        }
    }

    fn position_mut(&mut self) -> Option<&mut Position> {
        match self {
            Self::Malformed { at, .. } | Self::Truncated { at, .. } | Self::WrongRoot { at, .. } => Some(at),
            Self::Doctype { at, .. } | Self::TooDeep { at, .. } => Some(at),
            Self::Io { .. } | Self::TooLarge { .. } | Self::Empty { .. } => None,
        }
    }
}

impl Outcome {
    /// Failed or errored.
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Failed | Outcome::Error)
    }
}

impl TestCase {
    /// The case's result: the last attempt that was not skipped decides; a pass after a failure
    /// is flaky; a case whose every attempt was skipped is skipped.
    pub fn status(&self) -> Status {
        let mut ran = self.attempts.iter().filter(|a| a.outcome != Outcome::Skipped);
        let Some(last) = ran.next_back() else { return Status::Skipped };
        match last.outcome {
            Outcome::Failed => Status::Failed,
            Outcome::Error => Status::Error,
            _ if ran.any(|a| a.outcome.is_failure()) => Status::Flaky,
            _ => Status::Passed,
        }
    }

    /// Seconds over all attempts that reported a time.
    pub fn total_time(&self) -> Option<f64> {
        self.attempts.iter().filter_map(|a| a.time).reduce(|a, b| a + b)
    }

    /// The detail of the last failed or errored attempt: what to show for a failure.
    pub fn failure(&self) -> Option<&Detail> {
        self.attempts.iter().rev().filter(|a| a.outcome.is_failure()).find_map(|a| a.detail.as_ref())
    }

    /// Why a skipped case was skipped, when its `<skipped>` says: a message or text other than
    /// the bare "skipped" ginkgo writes for every spec it left out (the skip TestGrid drops).
    /// `None` for a case that ran.
    pub fn skip_reason(&self) -> Option<&Detail> {
        if self.status() != Status::Skipped {
            return None;
        }
        self.attempts.iter().rev().filter_map(|a| a.detail.as_ref()).find(|detail| !detail.is_bare_skip())
    }
}

/// A test's name without its bracketed tags (`[It]`, `[sig-network]`, `[Feature:LoadBalancer]`,
/// `[Slow]`) and with single spaces: the same test across releases, as upstream moves its tags
/// (v1.36 puts `[Slow]` before the test's text, v1.37 after it).
pub fn untagged_name(name: &str) -> String {
    let mut text = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '[' => depth += 1,
            ']' if depth > 0 => depth -= 1,
            _ if depth == 0 => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Detail {
    /// A skip that says nothing: no text, and no message but "skipped" (ginkgo's for every spec
    /// its filters leave out). TestGrid's updater drops such a case.
    pub fn is_bare_skip(&self) -> bool {
        self.text.text.is_empty()
            && self.text.dropped_bytes == 0
            && matches!(self.message.as_deref(), None | Some("" | "skipped"))
    }
}

impl Report {
    /// Every test case of every suite.
    pub fn cases(&self) -> impl Iterator<Item = (&Suite, &TestCase)> {
        self.suites.iter().flat_map(|s| s.cases.iter().map(move |c| (s, c)))
    }

    /// Tallies over all suites.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for (_, case) in self.cases() {
            counts.add(case.status());
        }
        counts
    }
}

impl Counts {
    fn add(&mut self, status: Status) {
        self.total += 1;
        match status {
            Status::Passed => self.passed += 1,
            Status::Failed => self.failed += 1,
            Status::Error => self.errors += 1,
            Status::Skipped => self.skipped += 1,
            Status::Flaky => self.flaky += 1,
        }
    }
}

impl Output {
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), dropped_bytes: 0 }
    }

    /// Whether part of the text was dropped by the size cap.
    pub fn is_truncated(&self) -> bool {
        self.dropped_bytes > 0
    }
}
