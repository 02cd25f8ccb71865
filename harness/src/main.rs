//! `harness`: the command line, over the `harness` library and the crates below it.

mod cli;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// kube's client logs each failed request at ERROR; the harness reports the failures that matter
/// itself, with what to do, so those lines are only noise while a cluster starts.
const DEFAULT_LOG_FILTER: &str = "info,kube_client::client::builder=off";

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER)))
        .with_writer(std::io::stderr)
        // Colours only for a terminal: CI logs and log files get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = crate::cli::Cli::parse();
    if let Err(error) = crate::cli::run(cli).await {
        // One line first, saying what failed and what to do; causes after it.
        eprintln!("error: {error}");
        for cause in error.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        std::process::exit(crate::cli::exit_code(&error));
    }
}
