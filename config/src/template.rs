//! `{placeholder}`s in the commands and arguments of `providers.yaml`, filled in at run time.
//!
//! `{name}` is replaced by the value of the placeholder `name`; `{{` and `}}` are a literal `{` and
//! `}`. Anything else with a brace is an error, caught when the file is loaded, so that a typo in a
//! placeholder never reaches a shell.

use std::collections::BTreeMap;
use std::fmt;

/// A value the harness substitutes into commands at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placeholder {
    /// The node (= instance) a test hook acts on; instance hooks only, where it is required.
    Node,
    /// The cluster's name.
    Cluster,
    /// The cluster's kubeconfig path.
    Kubeconfig,
    /// The run's artifacts directory (`$ARTIFACTS`): junit_*.xml go there.
    Artifacts,
    /// The provider's source checkout.
    RepoDir,
    /// The CCM binary the build produced (builds that produce a binary).
    CcmBinary,
    /// The run's Kubernetes version, e.g. `v1.37.1`.
    KubernetesVersion,
    /// The provider version (`--provider-version`), e.g. a commit.
    ProviderVersion,
    /// `local` deployer: the port the CCM process serves `/healthz` on (process deploys only).
    SecurePort,
    /// `local` deployer: the `--cloud-config` file pointing the CCM at the local cloud.
    CloudConfig,
    /// `local` deployer: the local cloud's state dir (`reference-ccm local-cloud --state-dir`).
    CloudStateDir,
    /// `local` deployer: the pod CIDR the nodes' pod CIDRs are cut from.
    ClusterCidr,
    /// The running `harness` binary (the `local` provider's hooks call `{harness} cluster instance`).
    Harness,
}

impl Placeholder {
    pub const ALL: [Placeholder; 13] = [
        Placeholder::Node,
        Placeholder::Cluster,
        Placeholder::Kubeconfig,
        Placeholder::Artifacts,
        Placeholder::RepoDir,
        Placeholder::CcmBinary,
        Placeholder::KubernetesVersion,
        Placeholder::ProviderVersion,
        Placeholder::SecurePort,
        Placeholder::CloudConfig,
        Placeholder::CloudStateDir,
        Placeholder::ClusterCidr,
        Placeholder::Harness,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Placeholder::Node => "node",
            Placeholder::Cluster => "cluster",
            Placeholder::Kubeconfig => "kubeconfig",
            Placeholder::Artifacts => "artifacts",
            Placeholder::RepoDir => "repo_dir",
            Placeholder::CcmBinary => "ccm_binary",
            Placeholder::KubernetesVersion => "kubernetes_version",
            Placeholder::ProviderVersion => "provider_version",
            Placeholder::SecurePort => "secure_port",
            Placeholder::CloudConfig => "cloud_config",
            Placeholder::CloudStateDir => "cloud_state_dir",
            Placeholder::ClusterCidr => "cluster_cidr",
            Placeholder::Harness => "harness",
        }
    }

    pub fn from_name(name: &str) -> Option<Placeholder> {
        Placeholder::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Only the `local` deployer can fill it in.
    pub fn local_deployer_only(self) -> bool {
        matches!(
            self,
            Placeholder::SecurePort | Placeholder::CloudConfig | Placeholder::CloudStateDir | Placeholder::ClusterCidr
        )
    }

    /// Every placeholder, `{like}` `{this}`, for error messages.
    pub fn list() -> String {
        Placeholder::ALL.iter().map(|p| format!("{{{}}}", p.as_str())).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for Placeholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}}}", self.as_str())
    }
}

/// What is wrong with a template, or what is missing to render it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unknown placeholder `{{{name}}}`; the placeholders are {list} (write `{{{{` and `}}}}` for literal braces)", list = Placeholder::list())]
    Unknown { name: String },
    #[error("`{{` at byte {at} is not closed; write `{{{{` for a literal `{{`")]
    Unclosed { at: usize },
    #[error("`}}` at byte {at} closes nothing; write `}}}}` for a literal `}}`")]
    Unopened { at: usize },
    #[error("no value for placeholder {0} here")]
    Missing(Placeholder),
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Brace(char),
    Var(Placeholder),
}

fn pieces(template: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut out = Vec::new();
    let mut rest = template;
    let mut offset = 0;
    while let Some(at) = rest.find(['{', '}']) {
        if at > 0 {
            out.push(Piece::Text(&rest[..at]));
        }
        let brace = rest.as_bytes()[at] as char;
        let after = &rest[at + 1..];
        let consumed = if after.starts_with(brace) {
            out.push(Piece::Brace(brace));
            at + 2
        } else if brace == '}' {
            return Err(TemplateError::Unopened { at: offset + at });
        } else {
            let Some(close) = after.find('}') else { return Err(TemplateError::Unclosed { at: offset + at }) };
            let name = &after[..close];
            let placeholder =
                Placeholder::from_name(name).ok_or_else(|| TemplateError::Unknown { name: name.to_owned() })?;
            out.push(Piece::Var(placeholder));
            at + 2 + close
        };
        rest = &rest[consumed..];
        offset += consumed;
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest));
    }
    Ok(out)
}

/// The placeholders `template` uses, in order, or why it is malformed.
pub fn placeholders(template: &str) -> Result<Vec<Placeholder>, TemplateError> {
    Ok(pieces(template)?
        .into_iter()
        .filter_map(|piece| match piece {
            Piece::Var(p) => Some(p),
            _ => None,
        })
        .collect())
}

/// The values of the placeholders at run time.
pub type Vars = BTreeMap<Placeholder, String>;

/// `template` with its placeholders replaced by their values in `vars`.
pub fn render(template: &str, vars: &Vars) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    for piece in pieces(template)? {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Brace(brace) => out.push(brace),
            Piece::Var(p) => out.push_str(vars.get(&p).ok_or(TemplateError::Missing(p))?),
        }
    }
    Ok(out)
}
