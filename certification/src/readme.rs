//! `README.md`: how to recreate the cluster and rerun the tests, with every command, flag and
//! version (the instructions refuse a link alone).

use std::fmt::Write;

use crate::product::Product;

/// Everything the README says; the caller knows the run.
#[derive(Debug, Clone)]
pub struct Reproduction {
    pub product: Product,
    /// The Kubernetes release tested (`v1.37.1`).
    pub kubernetes_version: String,
    /// The tool and its version that ran the tests (`cloud-provider-harness 0.1.0, commit 1a2b3c4`).
    pub tool: String,
    /// What the cluster is made of, a line each (`Nodes: 3 real nodes ...`).
    pub cluster: Vec<String>,
    /// The versions of the cluster's parts, as (part, version and where it comes from).
    pub components: Vec<(String, String)>,
    /// The configuration the run used (the provider's `providers.yaml` entry), verbatim.
    pub configuration: String,
    /// The steps to recreate the cluster and rerun the tests, as (what, shell commands).
    pub steps: Vec<(String, String)>,
    /// The exact test command the run executed.
    pub test_command: String,
}

impl Reproduction {
    pub fn to_markdown(&self) -> String {
        let p = &self.product;
        let mut md = String::new();
        let _ = writeln!(md, "# {} {} (Kubernetes {})\n", p.name, p.version, self.kubernetes_version);
        let _ = writeln!(md, "{}\n", p.description);
        let _ =
            writeln!(md, "Vendor: {}. Website: {}. Documentation: {}.\n", p.vendor, p.website_url, p.documentation_url);
        let _ = writeln!(
            md,
            "These results were produced by {} running upstream's `e2e.test` {} focused on \
             `[Conformance]`, with nothing skipped.\n",
            self.tool, self.kubernetes_version
        );
        let _ = writeln!(md, "## The cluster\n");
        for line in &self.cluster {
            let _ = writeln!(md, "- {line}");
        }
        let _ = writeln!(md, "\n| part | version |\n|---|---|");
        for (part, version) in &self.components {
            let _ = writeln!(md, "| {part} | {version} |");
        }
        let _ = writeln!(md, "\nThe configuration of the run:\n\n```yaml\n{}\n```\n", self.configuration.trim_end());
        let _ = writeln!(md, "## Recreate the cluster and rerun the tests\n");
        for (i, (what, commands)) in self.steps.iter().enumerate() {
            let _ = writeln!(md, "{}. {what}\n\n   ```sh\n{}\n   ```\n", i + 1, indent(commands));
        }
        let _ = writeln!(md, "## The test command\n\nAs the run executed it:\n\n```sh\n{}\n```", self.test_command);
        md
    }
}

fn indent(commands: &str) -> String {
    commands.lines().map(|line| format!("   {line}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_every_step_version_and_the_configuration() {
        let readme = Reproduction {
            product: Product {
                vendor: "V".into(),
                name: "N".into(),
                version: "0.1.0".into(),
                website_url: "https://example.org/".into(),
                repo_url: None,
                documentation_url: "https://example.org/docs".into(),
                product_logo_url: None,
                product_type: "installer".into(),
                description: "An installer.".into(),
                contact_email_address: "a@example.org".into(),
            },
            kubernetes_version: "v1.37.1".into(),
            tool: "cloud-provider-harness 0.1.0 (commit abc1234)".into(),
            cluster: vec!["Nodes: 3".into()],
            components: vec![("etcd".into(), "v3.6.5".into())],
            configuration: "name: local\n".into(),
            steps: vec![("Build".into(), "cargo build\nharness toolchain install".into())],
            test_command: "ginkgo --procs=4 e2e.test -- --provider=skeleton".into(),
        }
        .to_markdown();
        for needle in [
            "# N 0.1.0 (Kubernetes v1.37.1)",
            "| etcd | v3.6.5 |",
            "```yaml\nname: local\n```",
            "1. Build\n\n   ```sh\n   cargo build\n   harness toolchain install\n   ```",
            "ginkgo --procs=4 e2e.test -- --provider=skeleton",
        ] {
            assert!(readme.contains(needle), "{needle:?} not in\n{readme}");
        }
    }
}
