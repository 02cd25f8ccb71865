//! What a `certified-conformance` suite needs from the run: the product of the provider's
//! `certification:` block with its placeholders filled in, and what the submission's README says
//! about the cluster and how to recreate it.

use config::template::{self, Vars};
use config::{CcmBuild, Deployer, Provider, ProvidersConfig};

use super::Plan;
use crate::suites::certified_conformance::{About, CertifiedConformanceSuite, newest_pinned_minor};

/// The suite for `plan`'s provider, or why it cannot run.
pub(super) fn suite(
    name: &str,
    parallel: u16,
    plan: &Plan<'_>,
    vars: &Vars,
) -> Result<CertifiedConformanceSuite, String> {
    let product = product(plan.provider, vars)?;
    let stable = newest_pinned_minor();
    Ok(CertifiedConformanceSuite::new(name, parallel, product, about(plan), stable))
}

/// The `certification:` block with `{provider_version}` and `{kubernetes_version}` filled in.
fn product(provider: &Provider, vars: &Vars) -> Result<certification::Product, String> {
    let Some(block) = &provider.certification else {
        return Err(format!(
            "provider {} has no `certification:` block in providers.yaml: add one to run certified-conformance",
            provider.name
        ));
    };
    let render = |value: &str| template::render(value, vars).map_err(|e| format!("certification: {e}"));
    let optional = |value: &Option<String>| value.as_deref().map(render).transpose();
    let product = certification::Product {
        vendor: render(&block.vendor)?,
        name: render(&block.name)?,
        version: render(&block.version)?,
        website_url: render(&block.website_url)?,
        repo_url: optional(&block.repo_url)?,
        documentation_url: render(&block.documentation_url)?,
        product_logo_url: optional(&block.product_logo_url)?,
        product_type: render(&block.product_type)?,
        description: render(&block.description)?,
        contact_email_address: render(&block.contact_email_address)?,
    };
    match product.problems().first() {
        Some((field, reason)) => Err(format!("certification `{field}` {reason} once its placeholders are filled in")),
        None => Ok(product),
    }
}

fn about(plan: &Plan<'_>) -> About {
    let version = plan.version.to_string();
    let commit = super::workspace_commit();
    let tool = format!(
        "cloud-provider-harness {} (commit {})",
        env!("CARGO_PKG_VERSION"),
        commit.as_deref().unwrap_or("unknown")
    );
    let commit = commit.unwrap_or_else(|| "main".into());
    let provider = &plan.provider.name;
    let config_flag =
        if plan.config.source.exists() { format!(" --config {}", plan.config.source.display()) } else { String::new() };
    let run = format!(
        "target/release/harness run{config_flag} --provider {provider} --kubernetes {version} \
         --provider-version {} --suites certified-conformance --artifacts _artifacts",
        plan.provider_version
    );
    let steps = vec![
        (
            "Get the harness at the commit that produced these results".into(),
            format!(
                "git clone https://github.com/cloud-provider-harness/cloud-provider-harness\n\
                 cd cloud-provider-harness\ngit checkout {commit}"
            ),
        ),
        (
            "Build it and the Kubernetes toolchain (Kubernetes, etcd, containerd, CoreDNS and the node \
             images, from the Go module proxy and Debian packages; `scripts/quickstart` installs Rust, Go \
             and the Debian packages first on a fresh machine)"
                .into(),
            format!(
                "cargo build --release --locked -p harness\ntarget/release/harness toolchain install --kubernetes {version}"
            ),
        ),
        (
            "Bring the cluster up, run conformance, bring it down, and write and check the submission \
             (`_artifacts/artifacts/k8s-conformance/`); add `--keep-cluster` to keep the cluster for a rerun"
                .into(),
            run,
        ),
        (
            "Check a submission again, with the URLs fetched".into(),
            format!(
                "target/release/harness conformance verify --check-urls \
                 _artifacts/artifacts/k8s-conformance/{}/<product>",
                version.parse::<certification::Minor>().map_or_else(|_| version.clone(), |minor| minor.to_string())
            ),
        ),
    ];
    About {
        tool,
        cluster: cluster_lines(plan.provider),
        components: components(plan.provider, &version, &plan.provider_version),
        configuration: provider_entry(plan.config, provider),
        steps,
    }
}

fn cluster_lines(provider: &Provider) -> Vec<String> {
    match &provider.deployer {
        Deployer::Local { nodes, cloud, node_kind, .. } => vec![
            format!(
                "Deployer: the harness's embedded `local` deployer, on one Linux machine, no Docker: kube-apiserver, \
                 kube-controller-manager (`--cloud-provider=external`), kube-scheduler and etcd as processes"
            ),
            match node_kind {
                config::nodes::NodeKind::Real => format!(
                    "Nodes: {nodes} real nodes, each a kubelet with containerd and runc and a kube-proxy in network and \
                     mount namespaces of its own"
                ),
                config::nodes::NodeKind::Kwok => format!("Nodes: {nodes} kwok nodes (simulated: no pod runs)"),
            },
            format!("Cloud: `{}`, with the provider's cloud-controller-manager deployed as its entry says", cloud.name),
        ],
        other => vec![format!("Deployer: `{}`, as the configuration below says", other.kind().as_str())],
    }
}

fn components(provider: &Provider, version: &str, provider_version: &str) -> Vec<(String, String)> {
    let go = toolchain::resolve(Some(version))
        .ok()
        .and_then(|release| toolchain::installed(&release).ok())
        .and_then(|installed| installed.go_version())
        .unwrap_or_else(|| "the Go of `harness toolchain install`".into());
    let pinned = |module: &config::pins::GoModule, path: &str| {
        config::pins::required_version(module, path)
            .map_or_else(|| "pinned in tools/kube".into(), |v| format!("{path} {v}"))
    };
    let ccm = match &provider.ccm.build {
        CcmBuild::Cargo { package, .. } => {
            format!("`{package}` of this repository, built with cargo, at {provider_version}")
        }
        CcmBuild::Toolchain { bin, .. } => format!("`{bin}` built from the Go module proxy at {provider_version}"),
        CcmBuild::Command { .. } => format!("the provider's own build, at {provider_version}"),
    };
    vec![
        (
            "Kubernetes (control plane, kubelet, kube-proxy, kubectl, e2e.test, ginkgo)".into(),
            format!("k8s.io/kubernetes {version}, built with {go}"),
        ),
        ("etcd".into(), pinned(&config::pins::ETCD, "go.etcd.io/etcd/server/v3")),
        ("containerd".into(), format!("github.com/containerd/containerd/v2 {}", toolchain::containerd_version())),
        ("CoreDNS".into(), pinned(&config::pins::COREDNS, "github.com/coredns/coredns")),
        ("cloud-controller-manager".into(), ccm),
    ]
}

/// The provider's entry of the configuration, as written (the bundled file when no file was read).
fn provider_entry(config: &ProvidersConfig, name: &str) -> String {
    let text = std::fs::read_to_string(&config.source).unwrap_or_else(|_| config::BUNDLED.to_owned());
    match config::provider_entry(&text, name) {
        Some(entry) => entry.to_owned(),
        None => format!("# the entry of provider {name} in {}", config.source.display()),
    }
}
