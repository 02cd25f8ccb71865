//! One suite's tests × providers and Kubernetes minors (`/suite/{suite}`): of each provider and
//! minor the newest build with results of the suite, and each test's result there, with what it
//! said (a skip's reason, such as the capability the provider does not declare, or a failure's
//! message). Where the home page's matrix says which cells pass, this says which tests each
//! provider runs, skips (and why) or fails. Pure: built from rows the harness reads from its index.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::grid::Cell;
use crate::matrix::{MatrixBuild, OTHER, minor_of, sort_key};

/// A test's result in one build, with its message or skip reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteResult {
    pub test: String,
    pub cell: Cell,
    pub message: Option<String>,
}

/// A build and its results of the suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteBuild {
    pub build: MatrixBuild,
    pub results: Vec<SuiteResult>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteTable {
    pub suite: String,
    /// By provider, then newest minor first.
    pub columns: Vec<SuiteColumn>,
    /// By test name; without the tests every column skipped without a reason unless asked for.
    pub rows: Vec<SuiteRow>,
    /// Every distinct message of the shown cells, numbered from 1 by first appearance.
    pub notes: Vec<String>,
    /// Tests every column skipped without a reason (ginkgo's bare "skipped"), not in `rows`.
    pub hidden: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteColumn {
    pub minor: String,
    #[serde(flatten)]
    pub build: MatrixBuild,
    /// The column's results by state, in the legend's order.
    pub counts: Vec<(Cell, usize)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteRow {
    pub test: String,
    /// One per column; `None` where that build has no result for the test.
    pub cells: Vec<Option<SuiteCell>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuiteCell {
    pub cell: Cell,
    /// The number of its message in `notes` (from 1).
    pub note: Option<usize>,
}

/// A result and what it said, as read.
type Said<'a> = (Cell, Option<&'a str>);

/// The longest note kept, in bytes: a failure's message can be a whole stack.
const NOTE_BYTES: usize = 600;

/// The column a build belongs in: its provider and Kubernetes minor.
fn column_of(build: &MatrixBuild) -> (String, String) {
    (build.provider.clone(), minor_of(&build.kubernetes_version).unwrap_or_else(|| OTHER.to_owned()))
}

/// Of each provider × Kubernetes minor, the newest build (by start, then build id), ordered by
/// provider and then newest minor first; `build` finds the build in each item.
pub fn newest_per_column<T>(items: Vec<T>, build: impl Fn(&T) -> &MatrixBuild) -> Vec<T> {
    let mut newest: BTreeMap<(String, String), T> = BTreeMap::new();
    for item in items {
        let key = column_of(build(&item));
        let newer =
            |kept: &T| (build(&item).started_at, &build(&item).build) > (build(kept).started_at, &build(kept).build);
        if newest.get(&key).is_none_or(newer) {
            newest.insert(key, item);
        }
    }
    let mut kept: Vec<((String, String), T)> = newest.into_iter().collect();
    kept.sort_by_key(|((provider, minor), _)| (provider.clone(), std::cmp::Reverse((minor != OTHER, sort_key(minor)))));
    kept.into_iter().map(|(_, item)| item).collect()
}

impl SuiteTable {
    /// The table of these builds (one per column, as [`newest_per_column`] chose them).
    /// `show_skipped` keeps the tests every column skipped without a reason.
    pub fn new(suite: &str, builds: Vec<SuiteBuild>, show_skipped: bool) -> SuiteTable {
        let builds = newest_per_column(builds, |b| &b.build);
        // A row per test as it reads without its bracketed tags, as upstream moves `[Slow]` and
        // `[Feature:…]` between releases; named as the first column that has it names it.
        let mut by_test: BTreeMap<String, (&str, Vec<Option<Said>>)> = BTreeMap::new();
        // Each name's key once: a conformance suite repeats its thousands of names in every column.
        let mut keys: HashMap<&str, String> = HashMap::new();
        for (column, build) in builds.iter().enumerate() {
            for result in &build.results {
                let said = (result.cell, result.message.as_deref().filter(|m| !m.trim().is_empty()));
                let mut key = keys.entry(&result.test).or_insert_with(|| junit::untagged_name(&result.test)).clone();
                if by_test.get(&key).is_some_and(|(_, cells)| cells[column].is_some()) {
                    // Two tests of one build that differ only in their tags: rows of their own.
                    key = result.test.clone();
                }
                let (_, cells) = by_test.entry(key).or_insert_with(|| (&result.test, vec![None; builds.len()]));
                cells[column] = Some(said);
            }
        }
        let reasonless_skip = |cell: &Option<Said>| matches!(cell, None | Some((Cell::Skip, None)));
        let mut notes: Vec<String> = Vec::new();
        let mut rows = Vec::new();
        let mut hidden = 0;
        for (_, (test, cells)) in by_test {
            if !show_skipped && cells.iter().all(reasonless_skip) {
                hidden += 1;
                continue;
            }
            let cells = cells
                .into_iter()
                .map(|cell| {
                    cell.map(|(cell, message)| SuiteCell { cell, note: message.map(|m| note_number(&mut notes, m)) })
                })
                .collect();
            rows.push(SuiteRow { test: test.to_owned(), cells });
        }
        let columns = builds
            .into_iter()
            .map(|b| SuiteColumn { minor: column_of(&b.build).1, counts: counts(&b.results), build: b.build })
            .collect();
        SuiteTable { suite: suite.to_owned(), columns, rows, notes, hidden }
    }
}

/// The number (from 1) of `message` among the notes, added if new.
fn note_number(notes: &mut Vec<String>, message: &str) -> usize {
    let note = cut(message.trim(), NOTE_BYTES);
    match notes.iter().position(|n| *n == note) {
        Some(index) => index + 1,
        None => {
            notes.push(note);
            notes.len()
        }
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), with "…" when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn counts(results: &[SuiteResult]) -> Vec<(Cell, usize)> {
    Cell::ALL
        .into_iter()
        .map(|state| (state, results.iter().filter(|r| r.cell == state).count()))
        .filter(|(_, count)| *count > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(
        provider: &str,
        build: &str,
        kubernetes: &str,
        started_at: i64,
        results: &[(&str, Cell, Option<&str>)],
    ) -> SuiteBuild {
        SuiteBuild {
            build: MatrixBuild {
                provider: provider.into(),
                job: format!("ci-{provider}"),
                build: build.into(),
                kubernetes_version: kubernetes.into(),
                provider_version: None,
                started_at,
                passed: Some(true),
            },
            results: results
                .iter()
                .map(|(test, cell, message)| SuiteResult {
                    test: (*test).into(),
                    cell: *cell,
                    message: message.map(str::to_owned),
                })
                .collect(),
        }
    }

    const UDP: &str = "the provider does not declare the capability `load-balancer-udp` (providers.yaml capabilities): no UDP listeners";

    #[test]
    fn each_provider_and_minor_shows_its_newest_build_ordered_by_provider_then_newest_minor() {
        let builds = vec![
            build("local", "1", "v1.37.1", 10, &[("tcp", Cell::Fail, Some("timed out"))]),
            build("local", "2", "v1.37.1", 20, &[("tcp", Cell::Pass, None)]),
            build("local", "3", "v1.36.4", 30, &[("tcp", Cell::Pass, None)]),
            build("aws", "4", "v1.37.0", 5, &[("tcp", Cell::Pass, None), ("udp", Cell::Skip, Some(UDP))]),
            build("local", "5", "0123456789abcdef0123456789abcdef01234567", 40, &[("tcp", Cell::Pass, None)]),
        ];
        let table = SuiteTable::new("upstream-load-balancers", builds, false);
        let columns: Vec<(&str, &str, &str)> = table
            .columns
            .iter()
            .map(|c| (c.build.provider.as_str(), c.minor.as_str(), c.build.build.as_str()))
            .collect();
        assert_eq!(
            columns,
            [("aws", "1.37", "4"), ("local", "1.37", "2"), ("local", "1.36", "3"), ("local", "other", "5")]
        );
        assert_eq!(table.rows.iter().map(|r| r.test.as_str()).collect::<Vec<_>>(), ["tcp", "udp"]);
        let udp = &table.rows[1].cells;
        assert_eq!(udp[0], Some(SuiteCell { cell: Cell::Skip, note: Some(1) }), "aws skips UDP, saying why");
        assert_eq!(udp[1], None, "local's build has no UDP result");
        assert_eq!(table.notes, [UDP], "the older build's failure is not shown");
        assert_eq!(table.columns[0].counts, [(Cell::Pass, 1), (Cell::Skip, 1)]);
    }

    #[test]
    fn tests_skipped_without_a_reason_everywhere_are_hidden_unless_asked_for_and_notes_are_shared() {
        let builds = || {
            vec![
                build(
                    "a",
                    "1",
                    "v1.37.1",
                    1,
                    &[("left out", Cell::Skip, None), ("x", Cell::Fail, Some("boom")), ("y", Cell::Skip, Some("  "))],
                ),
                build("b", "2", "v1.37.1", 1, &[("left out", Cell::Skip, None), ("x", Cell::Fail, Some("boom"))]),
            ]
        };
        let table = SuiteTable::new("s", builds(), false);
        assert_eq!((table.hidden, table.rows.len()), (2, 1), "`left out` and `y` (a blank reason) are hidden");
        assert_eq!(table.notes, ["boom"], "one note for the same message");
        assert!(table.rows[0].cells.iter().all(|c| c.unwrap().note == Some(1)));
        let shown = SuiteTable::new("s", builds(), true);
        assert_eq!((shown.hidden, shown.rows.len()), (0, 3));
    }

    #[test]
    fn a_test_whose_tags_changed_between_releases_is_one_row_named_as_the_first_column_names_it() {
        let builds = vec![
            build("local", "1", "v1.36.4", 1, &[("[It] LoadBalancers [Slow] should work", Cell::Pass, None)]),
            build("local", "2", "v1.37.1", 1, &[("[It] LoadBalancers should work", Cell::Fail, None)]),
            build(
                "aws",
                "3",
                "v1.37.1",
                1,
                &[
                    ("[It] LoadBalancers should work", Cell::Pass, None),
                    ("[It] LoadBalancers should work [Slow]", Cell::Skip, Some("s")),
                ],
            ),
        ];
        let table = SuiteTable::new("s", builds, false);
        let rows: Vec<(&str, Vec<Option<Cell>>)> =
            table.rows.iter().map(|r| (r.test.as_str(), r.cells.iter().map(|c| c.map(|c| c.cell)).collect())).collect();
        assert_eq!(
            rows,
            [
                ("[It] LoadBalancers should work", vec![Some(Cell::Pass), Some(Cell::Fail), Some(Cell::Pass)]),
                ("[It] LoadBalancers should work [Slow]", vec![Some(Cell::Skip), None, None]),
            ],
            "aws's two tests that differ only in a tag stay two rows"
        );
    }

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary() {
        let long = "é".repeat(NOTE_BYTES);
        let table = SuiteTable::new("s", vec![build("a", "1", "v1.37.1", 1, &[("x", Cell::Fail, Some(&long))])], false);
        assert!(
            table.notes[0].ends_with('…') && table.notes[0].len() <= NOTE_BYTES + '…'.len_utf8(),
            "{}",
            table.notes[0]
        );
    }
}
