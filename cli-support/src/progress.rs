//! Progress for long steps: a spinner with the elapsed time when stdout is a terminal, plain
//! `tracing` lines otherwise (CI, pipes, `CI=true`).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// A long step that is under way; finish it with [`Step::done`] (dropping it counts as failed).
pub struct Step {
    message: String,
    started: Instant,
    spinner: Option<ProgressBar>,
    finished: bool,
}

fn interactive() -> bool {
    std::io::stdout().is_terminal() && std::env::var("CI").map_or(true, |ci| ci != "true")
}

/// Starts a step: `step("building kube-apiserver")`.
pub fn step(message: impl Into<String>) -> Step {
    let message = message.into();
    let spinner = interactive().then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("valid template"));
        bar.set_message(message.clone());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    });
    if spinner.is_none() {
        tracing::info!("{message} ...");
    }
    Step { message, started: Instant::now(), spinner, finished: false }
}

impl Step {
    pub fn done(mut self) -> Duration {
        self.finished = true;
        let elapsed = self.started.elapsed();
        match self.spinner.take() {
            Some(bar) => bar.finish_with_message(format!("{} ✓ {:.1?}", self.message, elapsed)),
            None => tracing::info!("{}: done in {:.1?}", self.message, elapsed),
        }
        elapsed
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let elapsed = self.started.elapsed();
        match self.spinner.take() {
            Some(bar) => bar.abandon_with_message(format!("{} ✗ {:.1?}", self.message, elapsed)),
            None => tracing::warn!("{}: failed after {:.1?}", self.message, elapsed),
        }
    }
}
