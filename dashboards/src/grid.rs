//! The TestGrid-like grid of one job: rows are tests, columns are builds newest first, each cell a
//! test's result in a build. Pure: built from plain rows (the harness reads them from its index:
//! each test's name once, results by test id), filtered, grouped and rendered as HTML or
//! serialised as JSON.
//!
//! What a maintainer sees first: a summary line (pass rate, failing and flaky tests of the shown
//! builds), the results beside a name column of bounded width, tests grouped by their `[sig-…]`
//! tag (else their suite) with each group's worst result per build, and the tests skipped in every
//! shown build hidden unless asked for.

use std::collections::HashMap;

use maud::{Escaper, Markup, PreEscaped, html};
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::trends::{flakes, pass_rate, percent};
use crate::web::layout::percent_encode;

/// A test's result in one build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cell {
    Pass,
    Fail,
    /// Failed, then passed on retry.
    Flaky,
    /// Failed, and the provider lists it as a known failure (`known_failures`): its run passed.
    #[serde(rename = "known-failure")]
    KnownFailure,
    Skip,
    /// The build is still running and has no result for the test yet.
    Running,
    /// The build has no result for the test.
    None,
}

impl Cell {
    /// Every state, in the legend's order.
    pub const ALL: [Cell; 7] =
        [Cell::Pass, Cell::Fail, Cell::Flaky, Cell::KnownFailure, Cell::Skip, Cell::Running, Cell::None];

    pub fn as_str(self) -> &'static str {
        match self {
            Cell::Pass => "pass",
            Cell::Fail => "fail",
            Cell::Flaky => "flaky",
            Cell::KnownFailure => "known-failure",
            Cell::Skip => "skip",
            Cell::Running => "running",
            Cell::None => "none",
        }
    }

    /// The cell as a table cell, `<td class="fail">fail</td>`: its state as its class and its text
    /// (nothing to escape, so written as it is: a 1,000 × 200 grid has 200,000 of them).
    pub fn td(self) -> PreEscaped<&'static str> {
        PreEscaped(match self {
            Cell::Pass => r#"<td class="pass">pass</td>"#,
            Cell::Fail => r#"<td class="fail">fail</td>"#,
            Cell::Flaky => r#"<td class="flaky">flaky</td>"#,
            Cell::KnownFailure => r#"<td class="known-failure">known-failure</td>"#,
            Cell::Skip => r#"<td class="skip">skip</td>"#,
            Cell::Running => r#"<td class="running">running</td>"#,
            Cell::None => r#"<td class="none">none</td>"#,
        })
    }

    /// How bad a state is, for a group's summary cell: fail, known failure, flaky, running, pass,
    /// skip, none.
    fn badness(self) -> u8 {
        match self {
            Cell::Fail => 6,
            Cell::KnownFailure => 5,
            Cell::Flaky => 4,
            Cell::Running => 3,
            Cell::Pass => 2,
            Cell::Skip => 1,
            Cell::None => 0,
        }
    }
}

/// A build as a column header shows it (TestGrid's idea: the versions under the build id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub build: String,
    pub started_at: i64,
    /// Epoch seconds; `None` while running or when the build was cut short.
    #[serde(default)]
    pub finished_at: Option<i64>,
    pub kubernetes_version: Option<String>,
    pub provider_version: Option<String>,
    /// `running`, `finished` or `aborted`.
    pub state: String,
    pub passed: Option<bool>,
}

/// A test as the index names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestName {
    pub suite: String,
    pub name: String,
}

/// One result as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRow {
    /// Index into the columns.
    pub column: usize,
    /// Index into the tests.
    pub test: usize,
    pub cell: Cell,
}

/// A job's latest builds as the index holds them: each test named once, results by index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GridData {
    /// Newest first.
    pub columns: Vec<Column>,
    pub tests: Vec<TestName>,
    pub results: Vec<ResultRow>,
}

/// Which rows to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Rows whose test name matches.
    pub test: Option<Regex>,
    /// Rows with at least one cell in one of these states (empty: any).
    pub statuses: Vec<Cell>,
    /// Also the tests skipped in every shown build (hidden by default; asking for `skip` shows
    /// them too).
    pub show_skipped: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub test: String,
    /// Its `[sig-…]` tag without brackets, else its suite.
    pub group: String,
    /// One per column, newest build first.
    pub cells: Vec<Cell>,
    /// For a test whose newest result is a failure: the oldest build of the unbroken run of
    /// failures that reaches the newest result.
    pub failing_since: Option<String>,
}

/// Consecutive rows of one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub name: String,
    pub rows: usize,
    /// Per column, the worst state of the group's rows: fail, flaky, running, pass, skip, none.
    pub worst: Vec<Cell>,
}

/// Of the shown rows and builds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Passed (or flaky) results over results that ran; `None` when none ran.
    pub pass_rate: Option<f64>,
    /// Tests whose newest result is a failure.
    pub failing_tests: usize,
    /// Tests that flaked: passed on a retry, or failed once between runs that did not fail.
    pub flaky_tests: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grid {
    pub job: String,
    /// Newest first.
    pub columns: Vec<Column>,
    /// By group (groups with a failing test first, ginkgo's suite-level nodes after the tests),
    /// in a group failing tests first (those failing longest first), then by name.
    pub rows: Vec<Row>,
    /// The groups of `rows`, in their order.
    pub groups: Vec<Group>,
    /// Rows before the filter.
    pub total_rows: usize,
    /// Rows hidden because they were skipped in every shown build.
    pub hidden_skipped: usize,
    pub summary: Summary,
}

impl Grid {
    /// A result naming a column or a test past the end is ignored.
    pub fn new(job: &str, data: GridData, filter: &Filter) -> Grid {
        let GridData { columns, tests, results } = data;
        let width = columns.len();
        let mut cells: Vec<Vec<Cell>> = vec![Vec::new(); tests.len()];
        for result in results.into_iter().filter(|r| r.column < width && r.test < tests.len()) {
            let row = &mut cells[result.test];
            if row.is_empty() {
                row.resize(width, Cell::None);
            }
            row[result.column] = result.cell;
        }
        let running: Vec<usize> = (0..width).filter(|i| columns[*i].state == "running").collect();
        let mut rows: Vec<Row> = Vec::new();
        for (test, mut cells) in tests.into_iter().zip(cells) {
            if cells.is_empty() {
                continue;
            }
            for index in &running {
                if cells[*index] == Cell::None {
                    cells[*index] = Cell::Running;
                }
            }
            rows.push(Row { group: group_of(&test), test: test.name, cells, failing_since: None });
        }
        let total_rows = rows.len();
        rows.retain(|row| filter.keeps(row));
        let mut hidden_skipped = 0;
        if !filter.show_skipped && !filter.statuses.contains(&Cell::Skip) {
            rows.retain(|row| {
                let always_skipped = row.cells.contains(&Cell::Skip)
                    && row.cells.iter().all(|c| matches!(c, Cell::Skip | Cell::None | Cell::Running));
                hidden_skipped += usize::from(always_skipped);
                !always_skipped
            });
        }
        for row in &mut rows {
            row.failing_since = failing_since(&row.cells).map(|index| columns[index].build.clone());
        }
        let mut failing_groups: HashMap<String, bool> = HashMap::new();
        for row in &rows {
            *failing_groups.entry(row.group.clone()).or_default() |= row.failing_since.is_some();
        }
        let failing_group = |row: &Row| failing_groups[&row.group];
        rows.sort_by(|a, b| {
            failing_group(b)
                .cmp(&failing_group(a))
                .then_with(|| (a.group == SUITE_NODES).cmp(&(b.group == SUITE_NODES)))
                .then_with(|| a.group.cmp(&b.group))
                .then_with(|| b.failing_since.is_some().cmp(&a.failing_since.is_some()))
                .then_with(|| failure_streak(&b.cells).cmp(&failure_streak(&a.cells)))
                .then_with(|| a.test.cmp(&b.test))
        });
        let mut groups: Vec<Group> = Vec::new();
        for row in &rows {
            match groups.last_mut() {
                Some(group) if group.name == row.group => {
                    group.rows += 1;
                    for (worst, cell) in group.worst.iter_mut().zip(&row.cells) {
                        if cell.badness() > worst.badness() {
                            *worst = *cell;
                        }
                    }
                }
                _ => groups.push(Group { name: row.group.clone(), rows: 1, worst: row.cells.clone() }),
            }
        }
        let summary = Summary {
            pass_rate: pass_rate(rows.iter().flat_map(|r| &r.cells)),
            failing_tests: rows.iter().filter(|r| r.failing_since.is_some()).count(),
            flaky_tests: rows.iter().filter(|r| flakes(&r.cells) > 0).count(),
        };
        Grid { job: job.to_owned(), columns, rows, groups, total_rows, hidden_skipped, summary }
    }

    /// Each column's pass rate over all of its shown rows.
    pub fn pass_rates(&self) -> Vec<Option<f64>> {
        (0..self.columns.len()).map(|i| pass_rate(self.rows.iter().map(|r| &r.cells[i]))).collect()
    }
}

/// The group of ginkgo's suite-level nodes (`[SynchronizedBeforeSuite]`, `[ReportAfterSuite]`, ...):
/// rows TestGrid shows too, but not tests, so they come after the tests unless one failed.
pub const SUITE_NODES: &str = "suite setup and teardown (ginkgo)";

/// What ginkgo names its suite-level nodes in JUnit (`types.NodeType`'s strings, in brackets).
const GINKGO_SUITE_NODES: [&str; 7] = [
    "[BeforeSuite]",
    "[AfterSuite]",
    "[SynchronizedBeforeSuite]",
    "[SynchronizedAfterSuite]",
    "[ReportBeforeSuite]",
    "[ReportAfterSuite]",
    "[DeferCleanup (Suite)]",
];

/// A test's group: ginkgo's suite-level nodes together ([`SUITE_NODES`]), else its first
/// `[sig-…]` tag, else its suite.
pub fn group_of(test: &TestName) -> String {
    if GINKGO_SUITE_NODES.iter().any(|node| test.name.starts_with(node)) {
        return SUITE_NODES.to_owned();
    }
    let tag = test.name.match_indices("[sig-").find_map(|(at, _)| {
        let rest = &test.name[at + 1..];
        rest.find(']').map(|end| rest[..end].to_owned())
    });
    tag.unwrap_or_else(|| test.suite.clone())
}

impl Filter {
    fn keeps(&self, row: &Row) -> bool {
        self.test.as_ref().is_none_or(|re| re.is_match(&row.test))
            && (self.statuses.is_empty() || row.cells.iter().any(|cell| self.statuses.contains(cell)))
    }
}

/// How many of the newest results (skipping builds without one) are failures in a row.
fn failure_streak(cells: &[Cell]) -> usize {
    cells
        .iter()
        .filter(|cell| !matches!(cell, Cell::None | Cell::Running | Cell::Skip))
        .take_while(|cell| **cell == Cell::Fail)
        .count()
}

/// The column of the oldest failure in the streak that reaches the newest result.
fn failing_since(cells: &[Cell]) -> Option<usize> {
    let streak = failure_streak(cells);
    (streak > 0).then(|| cells.iter().enumerate().filter(|(_, cell)| **cell == Cell::Fail).nth(streak - 1).unwrap().0)
}

/// `3,236`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Where the grid's links go: the page with the always-skipped rows toggled, and the job's
/// flakiest tests.
pub struct Links {
    pub toggle_skipped: String,
    pub flakiest: String,
}

/// The grid as an HTML fragment: the summary line, the legend, and a table in a box that scrolls
/// both ways under sticky headers. A cell's text is its state (`fail`), what screen readers say
/// with its row and column headers; the stylesheet shows a colour and a glyph instead. Clicking a
/// cell opens its column's build (the header links there too, for the keyboard) through one
/// delegated handler: per-cell links made a 1,000 × 50 grid 5 MB, not 1.3. A group's button
/// collapses it (the page's script); its header row keeps the worst result of each build.
pub fn render(grid: &Grid, links: &Links) -> Markup {
    let builds = grid.columns.len();
    let shown = grid.rows.len();
    let starts: Vec<usize> =
        grid.groups.iter().scan(0, |at, group| Some(std::mem::replace(at, *at + group.rows))).collect();
    html! {
        p.summary {
            strong { "Of the " (builds) " build" @if builds != 1 { "s" } " shown:" } " "
            "pass rate " strong { (grid.summary.pass_rate.map(percent).unwrap_or_else(|| "–".into())) }
            " · " strong { (grid.summary.failing_tests) } " failing test" @if grid.summary.failing_tests != 1 { "s" }
            " · " strong { (grid.summary.flaky_tests) } " flaky test" @if grid.summary.flaky_tests != 1 { "s" }
            " · " a href=(links.flakiest) { "flakiest tests" }
        }
        p.count {
            (thousands(shown)) " of " (thousands(grid.total_rows)) " tests shown"
            @if grid.hidden_skipped > 0 {
                "; " (thousands(grid.hidden_skipped)) " skipped in every shown build are hidden: "
                a #skipped-toggle href=(links.toggle_skipped) { "show them" }
            } @else if links.toggle_skipped.contains("skipped=show") {
                "; none is skipped in every shown build"
            } @else {
                "; tests skipped in every shown build are shown: " a #skipped-toggle href=(links.toggle_skipped) { "hide them" }
            }
        }
        ul.legend aria-label="legend" {
            @for cell in Cell::ALL {
                li { span class={ "cell " (cell.as_str()) } {} " " (cell.as_str()) }
            }
        }
        div.gridwrap {
            table.grid aria-label={ "results of " (grid.job) ": a row per test, grouped, a column per build, newest first" } {
                thead {
                    tr {
                        th.test scope="col" { "test" }
                        @for column in &grid.columns {
                            th scope="col" class=(column_class(column)) {
                                a href={ "/job/" (grid.job) "/build/" (column.build) } { (column.build) }
                                br; small { (column.kubernetes_version.as_deref().unwrap_or("?")) }
                                br; small title=(column.provider_version.as_deref().unwrap_or("?")) { (short(column.provider_version.as_deref().unwrap_or("?"))) }
                            }
                        }
                    }
                }
                @for (group, start) in grid.groups.iter().zip(&starts) {
                    tbody.group {
                        tr.group {
                            th.test scope="rowgroup" {
                                button type="button" aria-expanded="true" { (group.name) }
                                " " small { (group.rows) " test" @if group.rows != 1 { "s" } ", worst result per build" }
                            }
                            @for cell in &group.worst { (cell.td()) }
                        }
                        @for row in &grid.rows[*start..*start + group.rows] {
                            tr {
                                th.test scope="row" {
                                    div.name {
                                        a href=(test_href(&row.test)) title=(row.test) { (lighter_noise(&row.test)) }
                                        @if let Some(since) = &row.failing_since { span.since { "failing since " (since) } }
                                    }
                                }
                                @for cell in &row.cells { (cell.td()) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The grid filtered to this one test: `?test=^<name as a regex>$`.
fn test_href(test: &str) -> String {
    format!("?test={}", percent_encode(&format!("^{}$", regex::escape(test)), b""))
}

/// The name with ginkgo's noise (`[It]`, `[Conformance]`, the `[sig-…]` tag its group shows, other
/// bracketed labels) in a lighter span.
fn lighter_noise(test: &str) -> Markup {
    use std::fmt::Write;
    let mut out = String::with_capacity(test.len() + 32);
    let mut rest = test;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else { break };
        let _ = Escaper::new(&mut out).write_str(&rest[..open]);
        out.push_str("<span class=\"n\">");
        let _ = Escaper::new(&mut out).write_str(&rest[open..open + close + 1]);
        out.push_str("</span>");
        rest = &rest[open + close + 1..];
    }
    let _ = Escaper::new(&mut out).write_str(rest);
    PreEscaped(out)
}

/// A build's colour: running, pass, fail, or none when its outcome is unknown.
pub(crate) fn column_class(column: &Column) -> &'static str {
    match (column.state.as_str(), column.passed) {
        ("running", _) => "running",
        (_, Some(true)) => "pass",
        (_, Some(false)) => "fail",
        _ => "none",
    }
}

/// A 40-hex commit as its first 7.
fn short(version: &str) -> &str {
    if version.len() == 40 && version.bytes().all(|b| b.is_ascii_hexdigit()) { &version[..7] } else { version }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(build: &str, state: &str) -> Column {
        Column {
            build: build.into(),
            started_at: 0,
            finished_at: None,
            kubernetes_version: Some("v1.37.1".into()),
            provider_version: Some("0123456789abcdef0123456789abcdef01234567".into()),
            state: state.into(),
            passed: Some(state == "finished"),
        }
    }

    fn test(suite: &str, name: &str) -> TestName {
        TestName { suite: suite.into(), name: name.into() }
    }

    /// Builds 4 (newest, running) .. 1; tests a (fails since 2), b (passes), c (flaky once,
    /// skipped once), d (skipped in every build), and two `[sig-x]` tests, one failing.
    fn grid(filter: &Filter) -> Grid {
        let columns =
            vec![column("4", "running"), column("3", "finished"), column("2", "finished"), column("1", "finished")];
        let tests = vec![
            test("s", "a"),
            test("s", "b"),
            test("s", "c"),
            test("s", "d"),
            test("e2e", "[It] [sig-x] y works [Conformance]"),
            test("e2e", "[It] [sig-x] z works"),
        ];
        let r = |column, test, cell| ResultRow { column, test, cell };
        let results = vec![
            r(1, 0, Cell::Fail),
            r(2, 0, Cell::Fail),
            r(3, 0, Cell::Pass),
            r(0, 1, Cell::Pass),
            r(1, 1, Cell::Pass),
            r(3, 1, Cell::Pass),
            r(1, 2, Cell::Flaky),
            r(2, 2, Cell::Skip),
            r(3, 2, Cell::Pass),
            r(9, 2, Cell::Fail),
            r(1, 3, Cell::Skip),
            r(2, 3, Cell::Skip),
            r(1, 4, Cell::Pass),
            r(1, 5, Cell::Fail),
            r(1, 9, Cell::Fail),
        ];
        Grid::new("ci-local", GridData { columns, tests, results }, filter)
    }

    fn names(grid: &Grid) -> Vec<&str> {
        grid.rows.iter().map(|r| r.test.as_str()).collect()
    }

    #[test]
    fn every_cell_is_named_alike_in_json_in_its_class_and_in_the_filter() {
        for cell in Cell::ALL {
            assert_eq!(serde_json::to_value(cell).unwrap(), cell.as_str(), "{cell:?}");
            let td = cell.td().0;
            assert_eq!(td, format!(r#"<td class="{0}">{0}</td>"#, cell.as_str()), "{cell:?}");
        }
        assert!(Cell::KnownFailure.badness() < Cell::Fail.badness(), "a listed failure is not the worst");
        assert!(Cell::KnownFailure.badness() > Cell::Flaky.badness());
    }

    #[test]
    fn cells_fill_by_column_and_a_running_build_shows_running_where_it_has_no_result() {
        let grid = grid(&Filter::default());
        let cells = |test: &str| grid.rows.iter().find(|r| r.test == test).unwrap().cells.clone();
        assert_eq!(cells("a"), [Cell::Running, Cell::Fail, Cell::Fail, Cell::Pass]);
        assert_eq!(cells("b"), [Cell::Pass, Cell::Pass, Cell::None, Cell::Pass]);
        assert_eq!(cells("c"), [Cell::Running, Cell::Flaky, Cell::Skip, Cell::Pass]);
    }

    #[test]
    fn groups_with_a_failing_test_come_first_and_in_a_group_the_failing_tests_with_since_when() {
        let grid = grid(&Filter::default());
        assert_eq!(names(&grid), ["a", "b", "c", "[It] [sig-x] z works", "[It] [sig-x] y works [Conformance]"]);
        assert_eq!(grid.rows[0].failing_since.as_deref(), Some("2"));
        assert_eq!(grid.rows[2].failing_since, None, "flaky is not failing");
        let groups: Vec<(&str, usize)> = grid.groups.iter().map(|g| (g.name.as_str(), g.rows)).collect();
        assert_eq!(groups, [("s", 3), ("sig-x", 2)]);
        assert_eq!(grid.groups[0].worst, [Cell::Running, Cell::Fail, Cell::Fail, Cell::Pass], "the worst per build");
        assert_eq!(grid.groups[1].worst, [Cell::Running, Cell::Fail, Cell::None, Cell::None]);
    }

    /// A ginkgo run's `junit_01.xml` starts and ends with its suite-level nodes, and its suite's
    /// name ("Kubernetes e2e suite") sorts before every `sig-` group.
    #[test]
    fn ginkgo_suite_nodes_come_after_the_tests_unless_one_failed() {
        let columns = vec![column("2", "finished"), column("1", "finished")];
        let tests = vec![
            test("Kubernetes e2e suite", "[SynchronizedBeforeSuite]"),
            test("Kubernetes e2e suite", "[It] [sig-apps] Deployment works [Conformance]"),
            test("Kubernetes e2e suite", "[ReportAfterSuite] Kubernetes e2e suite report"),
            test("Kubernetes e2e suite", "[It] [sig-node] Pods work [Conformance]"),
            test("cloud-e2e", "[cloud-e2e] [Feature:CCM] The CCM should answer /healthz with 200"),
        ];
        let all = |cell| (0..tests.len()).map(|test| ResultRow { column: 0, test, cell }).collect::<Vec<_>>();
        let data = |results| GridData { columns: columns.clone(), tests: tests.clone(), results };
        let passed = Grid::new("ci-local", data(all(Cell::Pass)), &Filter::default());
        let groups: Vec<&str> = passed.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(groups, ["cloud-e2e", "sig-apps", "sig-node", SUITE_NODES]);
        assert_eq!(
            names(&passed)[3..],
            ["[ReportAfterSuite] Kubernetes e2e suite report", "[SynchronizedBeforeSuite]"]
        );

        let mut results = all(Cell::Pass);
        results[0].cell = Cell::Fail;
        let failed = Grid::new("ci-local", data(results), &Filter::default());
        assert_eq!(failed.groups[0].name, SUITE_NODES, "a failed suite node is what broke the build");
    }

    #[test]
    fn tests_skipped_in_every_build_are_hidden_unless_asked_for_and_counted() {
        let grid_default = grid(&Filter::default());
        assert!(!names(&grid_default).contains(&"d"));
        assert_eq!((grid_default.hidden_skipped, grid_default.total_rows), (1, 6));
        let shown = grid(&Filter { show_skipped: true, ..Filter::default() });
        assert!(names(&shown).contains(&"d") && shown.hidden_skipped == 0);
        let skips = grid(&Filter { statuses: vec![Cell::Skip], ..Filter::default() });
        assert_eq!(names(&skips), ["c", "d"], "asking for skipped tests shows them");
    }

    #[test]
    fn the_summary_counts_the_pass_rate_failing_and_flaky_tests_of_the_shown_builds() {
        let grid = grid(&Filter::default());
        // Ran: a F F P, b P P P, c ~ P, y P, z F: 7 of 10 passed (flaky counts as passed).
        assert_eq!(grid.summary, Summary { pass_rate: Some(0.7), failing_tests: 2, flaky_tests: 1 });
        assert_eq!(grid.pass_rates(), [Some(1.0), Some(0.6), Some(0.0), Some(1.0)]);
    }

    #[test]
    fn filters_keep_rows_by_name_and_by_status() {
        let by_name = grid(&Filter { test: Some(Regex::new("^[bc]$").unwrap()), ..Filter::default() });
        assert_eq!(names(&by_name), ["b", "c"]);
        assert_eq!(by_name.total_rows, 6);
        let flaky = grid(&Filter { statuses: vec![Cell::Flaky], ..Filter::default() });
        assert_eq!(names(&flaky), ["c"]);
    }

    fn links() -> Links {
        Links { toggle_skipped: "?skipped=show".into(), flakiest: "/flaky?job=ci-local".into() }
    }

    #[test]
    fn every_cell_says_its_state_in_text_and_every_column_links_to_its_build() {
        let html = render(&grid(&Filter::default()), &links()).into_string();
        let a_row = r#"<td class="running">running</td><td class="fail">fail</td><td class="fail">fail</td><td class="pass">pass</td>"#;
        assert!(html.contains(a_row), "{html}");
        assert_eq!(html.matches("<td ").count(), 4 * (5 + 2), "five rows and two group rows: {html}");
        assert!(html.contains(r#"<a href="/job/ci-local/build/3">3</a>"#), "{html}");
        assert!(
            html.contains("failing since 2")
                && html.contains(r#"title="0123456789abcdef0123456789abcdef01234567">0123456<"#),
            "{html}"
        );
        assert!(
            html.contains(
                "pass rate <strong>70%</strong> · <strong>2</strong> failing tests · <strong>1</strong> flaky test "
            ),
            "{html}"
        );
        assert!(html.contains(r#"5 of 6 tests shown; 1 skipped in every shown build are hidden: <a id="skipped-toggle" href="?skipped=show">show them</a>"#), "{html}");
    }

    #[test]
    fn a_row_links_its_full_name_with_ginkgo_noise_lighter_and_groups_collapse_by_a_button() {
        let html = render(&grid(&Filter::default()), &links()).into_string();
        assert!(
            html.contains(r#"<a href="?test=%5E%5C%5BIt%5C%5D%20%5C%5Bsig%5C-x%5C%5D%20y%20works%20%5C%5BConformance%5C%5D%24" title="[It] [sig-x] y works [Conformance]"><span class="n">[It]</span> <span class="n">[sig-x]</span> y works <span class="n">[Conformance]</span></a>"#),
            "{html}"
        );
        assert!(html.contains(r#"<tbody class="group"><tr class="group"><th class="test" scope="rowgroup"><button type="button" aria-expanded="true">sig-x</button> <small>2 tests, worst result per build</small></th><td class="running">running</td><td class="fail">fail</td>"#), "{html}");
        assert_eq!(thousands(3236), "3,236");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
