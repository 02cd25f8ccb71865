//! The dashboard's data from the SQL index (`dashboards::web::Source`).

use async_trait::async_trait;
use dashboards::grid::{Cell, Column, ResultRow};
use dashboards::web::{JobSummary, Source};

use crate::results::index::Index;
use crate::results::record::{State, TestStatus};

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
        let columns: Vec<Column> = latest
            .iter()
            .map(|b| Column {
                build: b.build.clone(),
                started_at: b.started_at,
                kubernetes_version: b.versions.kubernetes_version.clone(),
                provider_version: b.versions.provider_version.clone(),
                state: match b.state {
                    State::Running => "running",
                    State::Aborted => "aborted",
                    State::Finished => "finished",
                }
                .to_owned(),
                passed: b.passed,
            })
            .collect();
        let position = |build: &str| columns.iter().position(|c| c.build == build);
        let results = self.0.grid_results(job, limit).await.map_err(|e| e.to_string())?;
        let rows = results
            .into_iter()
            .filter_map(|(build, test, status)| Some(ResultRow { column: position(&build)?, test, cell: cell(status) }))
            .collect();
        Ok(Some((columns, rows)))
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
