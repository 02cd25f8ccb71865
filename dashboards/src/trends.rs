//! Flakiness and trends: per test its flake and failure rate over a job's shown builds (the
//! "flakiest tests" view), and per job a pass-rate and a duration sparkline, as inline SVG with a
//! text equivalent (no script). Pure.

use maud::{Markup, html};
use serde::{Deserialize, Serialize};

use crate::grid::{Cell, Grid};

/// A test's runs in a job's shown builds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestStats {
    pub job: String,
    pub test: String,
    /// Builds where it ran: passed, failed or flaky (skipped and missing results are no runs).
    pub runs: usize,
    pub failures: usize,
    /// Runs that failed then passed on a retry, and failures between two runs that did not fail.
    pub flakes: usize,
    pub flake_rate: f64,
    pub failure_rate: f64,
}

/// How many of `cells`' runs were flakes: flaky on retry, or a lone failure (its neighbouring runs
/// did not fail). Cells in any order of builds, as long as it is the builds' order.
pub fn flakes(cells: &[Cell]) -> usize {
    let runs: Vec<Cell> =
        cells.iter().copied().filter(|c| matches!(c, Cell::Pass | Cell::Fail | Cell::Flaky)).collect();
    let lone_failure = |i: usize| {
        runs[i] == Cell::Fail && i > 0 && i + 1 < runs.len() && runs[i - 1] != Cell::Fail && runs[i + 1] != Cell::Fail
    };
    (0..runs.len()).filter(|&i| runs[i] == Cell::Flaky || lone_failure(i)).count()
}

/// Every test of the grid that failed or flaked at least once, with its rates.
pub fn test_stats(grid: &Grid) -> Vec<TestStats> {
    grid.rows
        .iter()
        .filter_map(|row| {
            let runs = row.cells.iter().filter(|c| matches!(c, Cell::Pass | Cell::Fail | Cell::Flaky)).count();
            let failures = row.cells.iter().filter(|c| **c == Cell::Fail).count();
            let flakes = flakes(&row.cells);
            (runs > 0 && failures + flakes > 0).then(|| TestStats {
                job: grid.job.clone(),
                test: row.test.clone(),
                runs,
                failures,
                flakes,
                flake_rate: flakes as f64 / runs as f64,
                failure_rate: failures as f64 / runs as f64,
            })
        })
        .collect()
}

/// Flakiest first, then most failing, then by job and test.
pub fn sort_flakiest(stats: &mut [TestStats]) {
    stats.sort_by(|a, b| {
        b.flake_rate
            .total_cmp(&a.flake_rate)
            .then(b.failure_rate.total_cmp(&a.failure_rate))
            .then_with(|| (&a.job, &a.test).cmp(&(&b.job, &b.test)))
    });
}

/// One build of a job, for its sparklines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub build: String,
    pub started_at: i64,
    pub duration_seconds: Option<i64>,
    pub passed: Option<bool>,
    /// Passed (or flaky) results over those that ran; `None` when none ran.
    pub pass_rate: Option<f64>,
}

/// A job's latest finished builds, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobTrend {
    pub job: String,
    pub points: Vec<Point>,
}

/// The pass rate of a set of cells: passed or flaky over passed, flaky or failed (known failures
/// too: they failed).
pub fn pass_rate<'a>(cells: impl IntoIterator<Item = &'a Cell>) -> Option<f64> {
    let (mut passed, mut ran) = (0usize, 0usize);
    for cell in cells {
        match cell {
            Cell::Pass | Cell::Flaky => {
                passed += 1;
                ran += 1;
            }
            Cell::Fail | Cell::KnownFailure => ran += 1,
            _ => {}
        }
    }
    (ran > 0).then(|| passed as f64 / ran as f64)
}

const WIDTH: usize = 120;
const HEIGHT: usize = 24;

/// A percentage as the pages write it: `97%`, `99.5%` (one decimal below 100 when it matters).
pub fn percent(rate: f64) -> String {
    let value = rate * 100.0;
    let rounded = value.round();
    if (value - rounded).abs() < 0.05 || (1.0..=99.0).contains(&value) {
        format!("{rounded}%")
    } else {
        format!("{value:.1}%")
    }
}

/// Seconds as `1h2m`, `5m3s`, `42s`.
pub fn duration(seconds: i64) -> String {
    match seconds {
        s if s >= 3600 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m{}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// The test pass rate of each build as a sparkline (0–100 %), labelled with every value.
pub fn pass_rate_sparkline(trend: &JobTrend) -> Markup {
    let values: Vec<Option<f64>> = trend.points.iter().map(|p| p.pass_rate).collect();
    let said: Vec<String> = values.iter().map(|v| v.map(percent).unwrap_or_else(|| "none ran".into())).collect();
    let label =
        format!("{}: test pass rate of the last {} builds, oldest first: {}", trend.job, values.len(), said.join(", "));
    sparkline("pass-rate", &values, 1.0, &label)
}

/// Each build's duration as a sparkline (0 to the longest), labelled with every value.
pub fn duration_sparkline(trend: &JobTrend) -> Markup {
    let values: Vec<Option<f64>> = trend.points.iter().map(|p| p.duration_seconds.map(|s| s as f64)).collect();
    let longest = values.iter().flatten().copied().fold(0.0, f64::max);
    let said: Vec<String> =
        trend.points.iter().map(|p| p.duration_seconds.map(duration).unwrap_or_else(|| "?".into())).collect();
    let label =
        format!("{}: duration of the last {} builds, oldest first: {}", trend.job, values.len(), said.join(", "));
    sparkline("duration", &values, longest.max(1.0), &label)
}

/// A polyline over `values` (0..=max, bottom to top), a dot on the newest; gaps where a value is
/// missing. `role="img"` with the label and a `<title>` saying the same.
fn sparkline(class: &str, values: &[Option<f64>], max: f64, label: &str) -> Markup {
    let step = if values.len() > 1 { (WIDTH - 4) as f64 / (values.len() - 1) as f64 } else { 0.0 };
    let point =
        |i: usize, v: f64| (2.0 + step * i as f64, 2.0 + (HEIGHT - 4) as f64 * (1.0 - (v / max).clamp(0.0, 1.0)));
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for (i, value) in values.iter().enumerate() {
        match value {
            Some(v) => {
                let (x, y) = point(i, *v);
                current.push_str(&format!("{x:.1},{y:.1} "));
            }
            None if !current.is_empty() => lines.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    let last = values.iter().enumerate().rev().find_map(|(i, v)| v.map(|v| point(i, v)));
    html! {
        svg class={ "spark " (class) } xmlns="http://www.w3.org/2000/svg" role="img" aria-label=(label)
            width=(WIDTH) height=(HEIGHT) viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } {
            title { (label) }
            @for line in &lines { polyline points=(line.trim_end()) {} }
            @if let Some((x, y)) = last { circle cx=(format!("{x:.1}")) cy=(format!("{y:.1}")) r="2" {} }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Row;

    #[test]
    fn a_flake_is_a_retry_that_passed_or_a_lone_failure() {
        use Cell::*;
        assert_eq!(flakes(&[Pass, Fail, Pass, Skip, Flaky, Pass]), 2);
        assert_eq!(flakes(&[Pass, Fail, Skip, Fail, Pass]), 0, "two failures in a row (a skip between) are a breakage");
        assert_eq!(flakes(&[Fail, Pass, Pass]), 0, "the newest failure may be the start of a breakage");
        assert_eq!(flakes(&[Pass, Fail, None, Running, Pass]), 1);
    }

    #[test]
    fn the_flakiest_tests_come_first_with_their_rates() {
        use Cell::*;
        let row = |test: &str, cells: Vec<Cell>| Row {
            test: test.into(),
            group: "g".into(),
            cells,
            failing_since: Option::None,
        };
        let grid = Grid {
            job: "ci-a".into(),
            columns: vec![],
            rows: vec![
                row("steady", vec![Pass, Pass, Pass, Pass]),
                row("broken", vec![Fail, Fail, Pass, Pass]),
                row("flaky", vec![Pass, Flaky, Pass, Fail]),
                row("wobbly", vec![Pass, Fail, Pass, Skip]),
            ],
            total_rows: 4,
            hidden_skipped: 0,
            groups: vec![],
            summary: Default::default(),
        };
        let mut stats = test_stats(&grid);
        sort_flakiest(&mut stats);
        let order: Vec<(&str, usize, usize, usize)> =
            stats.iter().map(|s| (s.test.as_str(), s.runs, s.failures, s.flakes)).collect();
        assert_eq!(order, [("wobbly", 3, 1, 1), ("flaky", 4, 1, 1), ("broken", 4, 2, 0)]);
        assert!((stats[0].flake_rate - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn sparklines_say_every_value_in_text_and_break_where_one_is_missing() {
        let point = |build: &str, rate: Option<f64>, seconds: Option<i64>| Point {
            build: build.into(),
            started_at: 0,
            duration_seconds: seconds,
            passed: Some(true),
            pass_rate: rate,
        };
        let trend = JobTrend {
            job: "ci-a".into(),
            points: vec![
                point("1", Some(1.0), Some(300)),
                point("2", None, Some(62)),
                point("3", Some(0.5), None),
                point("4", Some(0.995), Some(3700)),
            ],
        };
        let svg = pass_rate_sparkline(&trend).into_string();
        assert!(svg.contains(r#"role="img" aria-label="ci-a: test pass rate of the last 4 builds, oldest first: 100%, none ran, 50%, 99.5%""#), "{svg}");
        assert!(svg.contains("<title>ci-a: test pass rate"), "{svg}");
        assert_eq!(svg.matches("<polyline ").count(), 2, "a gap where no test ran: {svg}");
        assert!(svg.contains(r#"<polyline points="2.0,2.0">"#), "100% is at the top: {svg}");
        assert!(svg.contains(r#"<circle cx="118.0" cy="2.1" r="2">"#), "the newest value has a dot: {svg}");
        let svg = duration_sparkline(&trend).into_string();
        assert!(svg.contains("oldest first: 5m0s, 1m2s, ?, 1h1m"), "{svg}");
    }
}
