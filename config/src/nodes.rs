//! What a local cluster's nodes are, and how many of each kind a cluster can have. The `local`
//! deployer's `node_kind` and `nodes` are checked against these when providers.yaml is loaded;
//! `local-cluster` builds the nodes.

use serde::{Deserialize, Serialize};

/// What a local cluster's nodes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// Simulated by kwok: thousands fit, nothing runs in a pod.
    #[default]
    Kwok,
    /// Real kubelets, containerd and runc in namespaces of their own: pods run.
    Real,
}

/// Real nodes a cluster can have: each takes an address of the cluster's node network.
pub const MAX_REAL_NODES: u32 = 200;

/// kwok nodes a cluster on the local cloud can have: each takes a /24 of the pod network
/// 127.128.0.0/10.
pub const MAX_KWOK_NODES: u32 = 1 << 14;

/// VMs one host of a vcsim inventory holds: its ESX host model has 4 GiB of memory (4,095 MiB),
/// and each node's VM takes [`VCSIM_VM_MEMORY_MIB`].
pub const VCSIM_VMS_PER_HOST: u32 = 4095 / VCSIM_VM_MEMORY_MIB;
/// The memory of a node's VM in vcsim: the vSphere CCM's instance type reads `mem-1gb`.
pub const VCSIM_VM_MEMORY_MIB: u32 = 1024;

/// Nodes a cluster on moto can have: 3 zones with a subnet each, 240 instance addresses in each
/// (`.10` to `.249`).
pub const MAX_MOTO_NODES: u32 = 3 * (250 - 10);
