//! `reference-ccm`: a thin binary over `ccm::app`.

use clap::Parser;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .init();
    if let Err(error) = ccm::app::run(ccm::app::Options::parse()).await {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}
