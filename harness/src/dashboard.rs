//! The dashboard's data from the SQL index (`dashboards::web::Source`).

use async_trait::async_trait;
use dashboards::grid::{Cell, Column, ResultRow};
use dashboards::web::{BuildView, JobSummary, Source};

use crate::results::index::Index;
use crate::results::record::{BuildInfo, State, TestStatus};
use crate::run::steps::RUNNER_SUITE;

pub struct IndexSource(pub Index);

#[async_trait]
impl Source for IndexSource {
    async fn jobs(&self) -> Result<Vec<JobSummary>, String> {
        let jobs = self.0.jobs().await.map_err(|e| e.to_string())?;
        Ok(jobs.into_iter().map(|(job, provider)| JobSummary { job, provider }).collect())
    }

    async fn grid(&self, job: &str, builds: usize) -> Result<Option<(Vec<Column>, Vec<ResultRow>)>, String> {
        let limit = i64::try_from(builds).unwrap_or(i64::MAX);
        let latest = self.0.latest_builds(job, limit).await.map_err(|e| e.to_string())?;
        if latest.is_empty() && !self.jobs().await?.iter().any(|j| j.job == job) {
            return Ok(None);
        }
        let columns: Vec<Column> = latest.iter().map(column).collect();
        let position = |build: &str| columns.iter().position(|c| c.build == build);
        let results = self.0.grid_results(job, limit).await.map_err(|e| e.to_string())?;
        let rows = results
            .into_iter()
            .filter_map(|(build, test, status)| Some(ResultRow { column: position(&build)?, test, cell: cell(status) }))
            .collect();
        Ok(Some((columns, rows)))
    }

    async fn build(&self, job: &str, build: &str) -> Result<Option<BuildView>, String> {
        let Some(info) = self.0.build(job, build).await.map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let results = self.0.build_results(job, build).await.map_err(|e| e.to_string())?;
        let (steps, tests): (Vec<_>, Vec<_>) = results.into_iter().partition(|r| r.suite == RUNNER_SUITE);
        let mut counts: Vec<(Cell, usize)> = Vec::new();
        for test in &tests {
            match counts.iter_mut().find(|(c, _)| *c == cell(test.status)) {
                Some((_, count)) => *count += 1,
                None => counts.push((cell(test.status), 1)),
            }
        }
        Ok(Some(BuildView {
            job: job.to_owned(),
            column: column(&info),
            finished_at: info.finished_at,
            result: info.result.clone(),
            artifacts_url: info.artifacts_url.clone(),
            steps: steps.into_iter().map(|s| (s.name, cell(s.status))).collect(),
            failures: tests
                .into_iter()
                .filter(|t| t.status == TestStatus::Fail)
                .map(|t| (t.name, t.failure_message))
                .collect(),
            counts,
        }))
    }
}

fn column(build: &BuildInfo) -> Column {
    let state = match build.state {
        State::Running => "running",
        State::Aborted => "aborted",
        State::Finished => "finished",
    };
    Column {
        build: build.build.clone(),
        started_at: build.started_at,
        kubernetes_version: build.versions.kubernetes_version.clone(),
        provider_version: build.versions.provider_version.clone(),
        state: state.to_owned(),
        passed: build.passed,
    }
}

fn cell(status: TestStatus) -> Cell {
    match status {
        TestStatus::Pass => Cell::Pass,
        TestStatus::Fail => Cell::Fail,
        TestStatus::Flaky => Cell::Flaky,
        TestStatus::Skip => Cell::Skip,
    }
}
