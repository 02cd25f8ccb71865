//! A provider's own CCM in one file: its cloud (here an inventory of machines, read from
//! `--cloud-config`), passed to `ccm::app::run`. The controllers, the flags, leader election and
//! `/healthz` are ccm's, unchanged; the provider writes only its cloud and this `main`.
//!
//! ```sh
//! cargo run -p ccm --example own_cloud -- --kubeconfig=KUBECONFIG \
//!     --cloud-provider=inventory --cloud-config=inventory.txt --controllers=cloud-node,cloud-node-lifecycle
//! ```
//!
//! `inventory.txt` has a line per machine: `<node name> <zone> <instance type> <internal IPs>`, the
//! IPs comma-separated (a dual-stack machine has two).
//! The inventory offers instances only: with no load balancers or routes, the service and route
//! controllers have nothing to drive ([`CloudProvider`]'s parts default to unsupported).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use ccm::app::InitError;
use ccm::cloud::{CloudError, CloudProvider, InstanceMetadata, InstancesV2};
use clap::Parser;
use k8s_openapi::api::core::v1::{Node, NodeAddress};

const PROVIDER: &str = "inventory";

/// One machine of the inventory.
#[derive(Debug, Clone, PartialEq)]
struct Machine {
    zone: String,
    instance_type: String,
    internal_ips: Vec<String>,
}

/// The machines, by node name.
#[derive(Debug, Default)]
struct Inventory {
    machines: BTreeMap<String, Machine>,
}

impl Inventory {
    fn parse(text: &str) -> Result<Inventory, String> {
        let mut machines = BTreeMap::new();
        for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let [name, zone, instance_type, ips] = line.split_whitespace().collect::<Vec<_>>()[..] else {
                let number = number + 1;
                return Err(format!(
                    "line {number}: expected `<node> <zone> <instance type> <internal IPs>`, got {line:?}"
                ));
            };
            let internal_ips = ips.split(',').map(str::to_owned).collect();
            let machine = Machine { zone: zone.into(), instance_type: instance_type.into(), internal_ips };
            machines.insert(name.to_owned(), machine);
        }
        Ok(Inventory { machines })
    }

    fn machine(&self, node: &Node) -> Option<&Machine> {
        self.machines.get(node.metadata.name.as_deref()?)
    }
}

#[async_trait]
impl InstancesV2 for Inventory {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.machine(node).is_some())
    }

    async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
        // An inventory knows no power states.
        Ok(false)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        let machine = self.machine(node).ok_or(CloudError::InstanceNotFound)?;
        let name = node.metadata.name.clone().unwrap_or_default();
        let internal =
            machine.internal_ips.iter().map(|ip| NodeAddress { type_: "InternalIP".into(), address: ip.clone() });
        let hostname = NodeAddress { type_: "Hostname".into(), address: name.clone() };
        Ok(InstanceMetadata {
            provider_id: format!("{PROVIDER}://{name}"),
            instance_type: machine.instance_type.clone(),
            node_addresses: internal.chain([hostname]).collect(),
            zone: machine.zone.clone(),
            region: String::new(),
            additional_labels: BTreeMap::new(),
        })
    }
}

impl CloudProvider for Inventory {
    fn provider_name(&self) -> &str {
        PROVIDER
    }

    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }

    fn has_cluster_id(&self) -> bool {
        false
    }
}

/// The cloud initializer `ccm::app::run` calls once `--cloud-provider` names this provider.
/// Any error will do (`InitError`): `?` converts one, `.into()` makes one of a message.
fn inventory(config: Option<&Path>) -> Result<Arc<dyn CloudProvider>, InitError> {
    let path = config.ok_or("--cloud-provider=inventory needs --cloud-config (the inventory file)")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading --cloud-config {}: {e}", path.display()))?;
    let inventory = Inventory::parse(&text).map_err(|e| format!("--cloud-config {}: {e}", path.display()))?;
    Ok(Arc::new(inventory))
}

#[tokio::main]
async fn main() -> Result<(), ccm::app::AppError> {
    tracing_subscriber::fmt().with_writer(std::io::stderr).init();
    ccm::app::run(ccm::app::Options::parse(), PROVIDER, inventory).await
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str) -> Node {
        Node { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, ..Node::default() }
    }

    #[tokio::test]
    async fn the_inventory_answers_what_the_cloud_node_controller_asks() {
        let inventory =
            Inventory::parse("worker-1 zone-a m.large 10.0.0.11\n\nworker-2 zone-b m.small 10.0.0.12,fd00::12\n")
                .unwrap();
        let cloud: &dyn CloudProvider = &inventory;
        let instances = cloud.instances_v2().expect("instances are offered");
        assert!(cloud.load_balancer().is_none() && cloud.routes().is_none(), "only what the cloud has");
        assert!(instances.instance_exists(&node("worker-1")).await.unwrap());
        assert!(!instances.instance_exists(&node("worker-9")).await.unwrap());
        let metadata = instances.instance_metadata(&node("worker-2")).await.unwrap();
        assert_eq!(metadata.provider_id, "inventory://worker-2");
        assert_eq!((metadata.zone.as_str(), metadata.instance_type.as_str()), ("zone-b", "m.small"));
        let addresses: Vec<&str> = metadata.node_addresses.iter().map(|a| a.address.as_str()).collect();
        assert_eq!(addresses, ["10.0.0.12", "fd00::12", "worker-2"]);
        assert!(matches!(instances.instance_metadata(&node("worker-9")).await, Err(CloudError::InstanceNotFound)));
    }

    #[test]
    fn the_initializer_says_what_is_wrong_with_its_cloud_config() {
        let error = inventory(None).err().expect("no --cloud-config").to_string();
        assert!(error.contains("needs --cloud-config"), "{error}");
        let error = inventory(Some(Path::new("/nonexistent/inventory.txt"))).err().expect("no file").to_string();
        assert!(error.contains("reading --cloud-config /nonexistent/inventory.txt"), "{error}");
    }

    #[test]
    fn a_bad_inventory_line_is_named() {
        let error = Inventory::parse("worker-1 zone-a\n").unwrap_err();
        assert!(error.contains("line 1") && error.contains("worker-1 zone-a"), "{error}");
    }
}
