//! The TestGrid-like grid of one job: rows are tests, columns are builds newest first, each cell a
//! test's result in a build. Pure: built from plain rows (the harness reads them from its index),
//! filtered, and rendered as HTML or serialised as JSON.

use std::collections::HashMap;

use maud::{Markup, html};
use regex::Regex;
use serde::{Deserialize, Serialize};

/// A test's result in one build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cell {
    Pass,
    Fail,
    /// Failed, then passed on retry.
    Flaky,
    Skip,
    /// The build is still running and has no result for the test yet.
    Running,
    /// The build has no result for the test.
    None,
}

impl Cell {
    /// Every state, in the legend's order.
    pub const ALL: [Cell; 6] = [Cell::Pass, Cell::Fail, Cell::Flaky, Cell::Skip, Cell::Running, Cell::None];

    pub fn as_str(self) -> &'static str {
        match self {
            Cell::Pass => "pass",
            Cell::Fail => "fail",
            Cell::Flaky => "flaky",
            Cell::Skip => "skip",
            Cell::Running => "running",
            Cell::None => "none",
        }
    }
}

/// A build as a column header shows it (TestGrid's idea: the versions under the build id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub build: String,
    pub started_at: i64,
    pub kubernetes_version: Option<String>,
    pub provider_version: Option<String>,
    /// `running`, `finished` or `aborted`.
    pub state: String,
    pub passed: Option<bool>,
}

/// One result as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRow {
    /// Index into the columns.
    pub column: usize,
    pub test: String,
    pub cell: Cell,
}

/// Which rows to show.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Rows whose test name matches.
    pub test: Option<Regex>,
    /// Rows with at least one cell in one of these states (empty: any).
    pub statuses: Vec<Cell>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub test: String,
    /// One per column, newest build first.
    pub cells: Vec<Cell>,
    /// For a test whose newest result is a failure: the oldest build of the unbroken run of
    /// failures that reaches the newest result.
    pub failing_since: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grid {
    pub job: String,
    /// Newest first.
    pub columns: Vec<Column>,
    /// Failing tests first (those failing longest first), then by name.
    pub rows: Vec<Row>,
    /// Rows before the filter.
    pub total_rows: usize,
}

impl Grid {
    /// `columns` newest first; a result naming a column past the end is ignored.
    pub fn new(job: &str, columns: Vec<Column>, results: Vec<ResultRow>, filter: &Filter) -> Grid {
        let width = columns.len();
        let mut rows: Vec<Row> = Vec::new();
        let mut by_test: HashMap<String, usize> = HashMap::new();
        for result in results.into_iter().filter(|r| r.column < width) {
            let at = *by_test.entry(result.test.clone()).or_insert_with(|| {
                rows.push(Row { test: result.test.clone(), cells: vec![Cell::None; width], failing_since: None });
                rows.len() - 1
            });
            rows[at].cells[result.column] = result.cell;
        }
        for (index, column) in columns.iter().enumerate() {
            if column.state == "running" {
                for row in &mut rows {
                    if row.cells[index] == Cell::None {
                        row.cells[index] = Cell::Running;
                    }
                }
            }
        }
        let total_rows = rows.len();
        rows.retain(|row| filter.keeps(row));
        for row in &mut rows {
            row.failing_since = failing_since(&row.cells).map(|index| columns[index].build.clone());
        }
        rows.sort_by(|a, b| {
            let failing = |row: &Row| row.failing_since.is_some();
            let since = |row: &Row| failure_streak(&row.cells);
            (failing(b), since(b), &a.test).cmp(&(failing(a), since(a), &b.test))
        });
        Grid { job: job.to_owned(), columns, rows, total_rows }
    }
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

/// The grid as an HTML fragment: a table with sticky headers and a legend. A cell's text is its
/// state (`fail`), what screen readers say with its row and column headers; the stylesheet shows a
/// glyph instead. Clicking a cell opens its column's build (the header links there too, for the
/// keyboard) through one delegated handler: per-cell links made a 1,000 × 50 grid 5 MB, not 1.3.
pub fn render(grid: &Grid) -> Markup {
    html! {
        ul.legend aria-label="legend" {
            @for cell in Cell::ALL {
                li { span class={ "cell " (cell.as_str()) } {} " " (cell.as_str()) }
            }
        }
        p.count { (grid.rows.len()) " of " (grid.total_rows) " tests, " (grid.columns.len()) " builds" }
        table.grid aria-label={ "results of " (grid.job) ": a row per test, a column per build, newest first" } {
            thead {
                tr {
                    th.test scope="col" { "test" }
                    @for column in &grid.columns {
                        th scope="col" class=(column_class(column)) {
                            a href={ "/job/" (grid.job) "/build/" (column.build) } { (column.build) }
                            br; small { (column.kubernetes_version.as_deref().unwrap_or("?")) }
                            br; small { (short(column.provider_version.as_deref().unwrap_or("?"))) }
                        }
                    }
                }
            }
            tbody {
                @for row in &grid.rows {
                    tr {
                        th.test scope="row" {
                            (row.test)
                            @if let Some(since) = &row.failing_since { " " span.since { "failing since " (since) } }
                        }
                        @for cell in &row.cells { td class=(cell.as_str()) { (cell.as_str()) } }
                    }
                }
            }
        }
    }
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

fn short(version: &str) -> &str {
    if version.len() == 40 && version.bytes().all(|b| b.is_ascii_hexdigit()) { &version[..12] } else { version }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(build: &str, state: &str) -> Column {
        Column {
            build: build.into(),
            started_at: 0,
            kubernetes_version: Some("v1.37.1".into()),
            provider_version: Some("0123456789abcdef0123456789abcdef01234567".into()),
            state: state.into(),
            passed: Some(state == "finished"),
        }
    }

    /// Builds 4 (newest, running) .. 1; tests a (fails since 2), b (passes), c (flaky once, skipped once).
    fn grid(filter: &Filter) -> Grid {
        let columns =
            vec![column("4", "running"), column("3", "finished"), column("2", "finished"), column("1", "finished")];
        let r = |column, test: &str, cell| ResultRow { column, test: test.into(), cell };
        let results = vec![
            r(1, "a", Cell::Fail),
            r(2, "a", Cell::Fail),
            r(3, "a", Cell::Pass),
            r(0, "b", Cell::Pass),
            r(1, "b", Cell::Pass),
            r(3, "b", Cell::Pass),
            r(1, "c", Cell::Flaky),
            r(2, "c", Cell::Skip),
            r(3, "c", Cell::Pass),
            r(9, "c", Cell::Fail),
        ];
        Grid::new("ci-local", columns, results, filter)
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
    fn a_failing_test_comes_first_with_the_build_it_has_failed_since() {
        let grid = grid(&Filter::default());
        let order: Vec<&str> = grid.rows.iter().map(|r| r.test.as_str()).collect();
        assert_eq!(order, ["a", "b", "c"]);
        assert_eq!(grid.rows[0].failing_since.as_deref(), Some("2"));
        assert_eq!(grid.rows[2].failing_since, None, "flaky is not failing");
    }

    #[test]
    fn filters_keep_rows_by_name_and_by_status() {
        let by_name = grid(&Filter { test: Some(Regex::new("^[bc]$").unwrap()), statuses: vec![] });
        assert_eq!(by_name.rows.iter().map(|r| r.test.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(by_name.total_rows, 3);
        let flaky = grid(&Filter { test: None, statuses: vec![Cell::Flaky] });
        assert_eq!(flaky.rows.iter().map(|r| r.test.as_str()).collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn every_cell_says_its_state_in_text_and_every_column_links_to_its_build() {
        let html = render(&grid(&Filter::default())).into_string();
        let a_row = r#"<td class="running">running</td><td class="fail">fail</td><td class="fail">fail</td><td class="pass">pass</td>"#;
        assert!(html.contains(a_row), "{html}");
        assert_eq!(html.matches("<td ").count(), 12, "{html}");
        assert!(html.contains(r#"<a href="/job/ci-local/build/3">3</a>"#), "{html}");
        assert!(html.contains("failing since 2") && html.contains("0123456789ab<"), "{html}");
    }
}
