//! `reference-ccm`: the bundled reference cloud-controller-manager. It is `ccm`'s app and
//! controllers with the `local` cloud wired in here, as a provider's own CCM wires its cloud into
//! upstream's `app.NewCloudControllerManagerCommand`; `reference-ccm local-cloud ...` serves and
//! administers the local simulated cloud itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use ccm::cloud::CloudProvider;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(name = "reference-ccm", version, about = "The bundled reference cloud-controller-manager")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    options: ccm::app::Options,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The local simulated cloud: serve it, or administer a running one.
    LocalCloud(local_cloud::cli::LocalCloudCommand),
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::LocalCloud(command)) => local_cloud::cli::run(command).await,
        None => ccm::app::run(cli.options, local_cloud::PROVIDER_NAME, local_provider).await.map_err(Into::into),
    };
    if let Err(error) = result {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

/// `--cloud-config` of the `local` provider: where its cloud is, by URL or by the state dir the
/// cloud serves (whose address file gives the URL).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LocalCloudConfig {
    url: Option<String>,
    state_dir: Option<PathBuf>,
}

/// The `local` cloud, from `--cloud-config`: ccm's cloud initializer.
fn local_provider(path: Option<&Path>) -> Result<Arc<dyn CloudProvider>, ccm::app::InitError> {
    Ok(local_cloud_from(path)?)
}

fn local_cloud_from(path: Option<&Path>) -> Result<Arc<dyn CloudProvider>> {
    let path = path.context("--cloud-provider=local needs --cloud-config (a file with `url:` or `stateDir:`)")?;
    let text = std::fs::read_to_string(path).with_context(|| format!("reading --cloud-config {}", path.display()))?;
    let config: LocalCloudConfig =
        serde_yaml_ng::from_str(&text).with_context(|| format!("--cloud-config {} is not valid", path.display()))?;
    let url = match (config.url, config.state_dir) {
        (Some(url), _) => url,
        (None, Some(dir)) => local_cloud::url_from_state_dir(&dir)?,
        (None, None) => bail!("--cloud-config {} names neither `url` nor `stateDir`", path.display()),
    };
    let cloud = local_cloud::LocalCloud::new(local_cloud::ClientConfig::new(url))?;
    Ok(Arc::new(reference_ccm::local_provider::LocalProvider::new(cloud)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ccm shows an initializer's error with its causes: what was read, and why it failed.
    #[test]
    fn a_cloud_config_that_cannot_be_read_is_named_with_its_cause() {
        let refused = local_provider(Some(Path::new("/nonexistent/cloud.yaml"))).err().expect("no such file");
        let error = ccm::app::AppError::Initialize(refused).to_string();
        assert!(error.starts_with("reading --cloud-config /nonexistent/cloud.yaml: "), "{error}");
        assert!(error.contains("No such file or directory"), "{error}");
    }

    #[test]
    fn the_local_cloud_is_a_subcommand_beside_upstreams_flags() {
        let cli = Cli::try_parse_from(["reference-ccm", "local-cloud", "--state-dir", "/tmp/x", "serve"]).unwrap();
        assert!(matches!(cli.command, Some(Command::LocalCloud(_))));
        let cli = Cli::try_parse_from(["reference-ccm", "--cloud-provider=local", "--controllers=*,-route"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.options.cloud_provider.as_deref(), Some("local"));
        assert_eq!(cli.options.controllers, ["*", "-route"]);
    }

    #[test]
    fn a_cloud_config_naming_no_cloud_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cloud.yaml");
        std::fs::write(&path, "{}\n").unwrap();
        let error = local_provider(Some(&path)).err().unwrap().to_string();
        assert!(error.contains("names neither `url` nor `stateDir`") && error.contains("cloud.yaml"), "{error}");
        let error = local_provider(None).err().unwrap().to_string();
        assert!(error.contains("needs --cloud-config"), "{error}");
    }
}
