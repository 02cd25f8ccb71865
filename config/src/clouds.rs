//! The facts of each cloud the `local` deployer can run beside its cluster (providers.yaml
//! `deployer.cloud`, `harness cluster up --cloud`): what `providers.yaml` is checked against when it
//! is loaded, and what `local-cluster`'s clouds (`local-cluster/src/clouds/<name>/`) report as
//! their own. The facts are data, in one table: the loader below every cloud reads them, and each
//! cloud's folder takes its row from here ([`named`]).

use crate::nodes::{MAX_KWOK_NODES, MAX_MOTO_NODES, MAX_REAL_NODES, NodeKind};

/// What a cloud is to the local deployer, as data.
#[derive(Debug, PartialEq, Eq)]
pub struct CloudFacts {
    /// Its name in providers.yaml `deployer.cloud` and `harness cluster up --cloud`.
    pub name: &'static str,
    /// How errors name it.
    pub label: &'static str,
    /// What it is, in a line (`--help`).
    pub about: &'static str,
    /// The node kinds a cluster on it can have, its default first.
    pub node_kinds: &'static [NodeKind],
    /// Why it cannot have the node kinds not in [`CloudFacts::node_kinds`].
    pub why_not_other_node_kinds: &'static str,
    /// The most nodes it has machines (addresses, instances) for; real nodes are fewer still
    /// ([`MAX_REAL_NODES`]).
    pub max_nodes: u32,
    /// Its inventory is a host per zone, tagged with providers.yaml's `zones` and `region`, each
    /// host holding [`crate::nodes::VCSIM_VMS_PER_HOST`] nodes ([`crate::VsphereTags`]).
    pub tagged_inventory: bool,
    /// Its CCM reports both IP families of a real node.
    pub dual_stack: bool,
    /// What it does not have, and why (`harness cluster load-balancers` or `routes` says so).
    pub lacks: &'static [(Lack, &'static str)],
}

/// Something a cloud may not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lack {
    LoadBalancers,
    Routes,
}

impl Lack {
    pub fn as_str(self) -> &'static str {
        match self {
            Lack::LoadBalancers => "load balancers",
            Lack::Routes => "routes",
        }
    }
}

impl CloudFacts {
    /// The nodes a cluster on it has when none are asked for.
    pub fn default_node_kind(&self) -> NodeKind {
        self.node_kinds[0]
    }

    /// Whether it can have nodes of `kind`.
    pub fn has_node_kind(&self, kind: NodeKind) -> bool {
        self.node_kinds.contains(&kind)
    }

    /// The most nodes of `kind` a cluster on it can have.
    pub fn max_nodes(&self, kind: NodeKind) -> u32 {
        match kind {
            NodeKind::Real => self.max_nodes.min(MAX_REAL_NODES),
            NodeKind::Kwok => self.max_nodes,
        }
    }

    /// Why it has no `what`, when it has none.
    pub fn lacks(&self, what: Lack) -> Option<&'static str> {
        self.lacks.iter().find(|(lack, _)| *lack == what).map(|(_, why)| *why)
    }
}

const BOTH: &[NodeKind] = &[NodeKind::Real, NodeKind::Kwok];

/// The clouds, the default first.
pub const CLOUDS: &[CloudFacts] = &[
    CloudFacts {
        name: "local",
        label: "local cloud",
        about: "the local simulated cloud, served by the bundled reference CCM (an instance per node, load balancers and routes)",
        node_kinds: BOTH,
        why_not_other_node_kinds: "",
        max_nodes: MAX_KWOK_NODES,
        tagged_inventory: false,
        dual_stack: true,
        lacks: &[],
    },
    CloudFacts {
        name: "moto",
        label: "aws cloud (moto)",
        about: "moto's EC2 and ELB APIs, the `aws` provider's cloud (an EC2 instance per kwok node)",
        node_kinds: &[NodeKind::Kwok],
        why_not_other_node_kinds: "its EC2 instances name and address the nodes, as AWS kubelets register, which no real node can be",
        max_nodes: MAX_MOTO_NODES,
        tagged_inventory: false,
        dual_stack: false,
        lacks: &[(Lack::Routes, "moto's route tables are not read by the harness")],
    },
    CloudFacts {
        name: "vcsim",
        label: "vsphere cloud (vcsim)",
        about: "govmomi's vcsim (the vCenter API), the `vsphere` provider's cloud (a VM per real node, zone tags)",
        node_kinds: &[NodeKind::Real],
        why_not_other_node_kinds: "the vSphere CCM drops loopback addresses, the only ones kwok's nodes have",
        max_nodes: MAX_REAL_NODES,
        tagged_inventory: true,
        // Single-stack unless an alpha switch of its CCM is on.
        dual_stack: false,
        lacks: &[
            (Lack::LoadBalancers, "the vSphere CCM's load balancers are NSX-T's, which vcsim does not simulate"),
            (Lack::Routes, "the vSphere CCM's routes are NSX-T's, which vcsim does not simulate"),
        ],
    },
    CloudFacts {
        name: "openstack",
        label: "openstack cloud",
        about: "OpenStack's own services with their fake back ends, the `openstack` provider's cloud (a Nova server per node)",
        node_kinds: BOTH,
        why_not_other_node_kinds: "",
        // A server per node, each booted through Nova's scheduler: as many as real nodes.
        max_nodes: MAX_REAL_NODES,
        tagged_inventory: false,
        // Its servers here have IPv4 ports only.
        dual_stack: false,
        lacks: &[],
    },
];

/// The cloud when providers.yaml names none.
pub fn default_cloud() -> &'static CloudFacts {
    &CLOUDS[0]
}

/// The facts of cloud `name`.
pub fn named(name: &str) -> Option<&'static CloudFacts> {
    CLOUDS.iter().find(|cloud| cloud.name == name)
}

/// Every cloud's name, in table order.
pub fn names() -> Vec<&'static str> {
    CLOUDS.iter().map(|cloud| cloud.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cloud_has_a_default_node_kind_a_reason_for_the_kinds_it_lacks_and_a_unique_name() {
        let mut names = names();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CLOUDS.len());
        for cloud in CLOUDS {
            assert!(!cloud.node_kinds.is_empty(), "{}", cloud.name);
            let lacks_a_kind = cloud.node_kinds.len() < 2;
            assert_eq!(lacks_a_kind, !cloud.why_not_other_node_kinds.is_empty(), "{}", cloud.name);
            assert!(cloud.max_nodes(NodeKind::Real) <= MAX_REAL_NODES);
        }
        assert_eq!(default_cloud().name, "local");
    }
}
