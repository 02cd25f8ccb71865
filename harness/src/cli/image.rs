//! `harness image build`: the harness's own image (`local_cluster::images::harness`), of this
//! harness's binary and the reference CCM beside it.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Subcommand;

use local_cluster::images::harness::Contents;

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build the harness's image as an OCI image archive, with no Docker: this harness binary and
    /// the reference CCM in /usr/local/bin, the C library and CA certificates, and a providers file
    /// at /etc/cloud-provider-harness/providers.yaml. `ctr images import` takes it, and so does
    /// `harness cluster up --image`.
    Build {
        /// The archive to write.
        #[arg(long, short, default_value = "harness-image.oci.tar")]
        output: PathBuf,
        /// The image's name [default: ghcr.io/cloud-provider-harness/harness:<this harness's
        /// version>, e.g. v0.1.0-0123456789ab].
        #[arg(long)]
        reference: Option<String>,
        #[command(flatten)]
        config: super::ConfigArg,
    },
}

pub async fn run_image(command: ImageCommand) -> Result<()> {
    let ImageCommand::Build { output, reference, config } = command;
    config.load()?; // checked before anything is built
    let providers_file = match config.file() {
        Some(path) => std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
        None => config::BUNDLED.as_bytes().to_vec(),
    };
    let tag = ::harness::image_tag();
    let reference = reference.unwrap_or_else(|| config::prow::image(&tag));
    let started = Instant::now();
    let built = tokio::task::spawn_blocking(move || -> Result<_> {
        let harness = std::env::current_exe().context("finding this harness's own binary")?;
        let reference_ccm = toolchain::workspace::build_reference_ccm()?;
        let work = tempfile::tempdir().context("creating a work directory")?;
        let contents = Contents {
            reference: &reference,
            harness: &harness,
            reference_ccm: &reference_ccm,
            providers_file: &providers_file,
            version: &tag,
            revision: ::harness::built_from_commit(),
        };
        Ok((local_cluster::images::harness::build(&contents, &output, work.path())?, reference))
    });
    let (built, reference) = super::until_interrupted(built).await???;
    let layers: Vec<String> = built.layer_bytes.iter().map(|b| mib(*b)).collect();
    println!(
        "{reference}: {} ({}, layers {}) in {:.1} s",
        built.archive.display(),
        mib(built.bytes),
        layers.join(" + "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
