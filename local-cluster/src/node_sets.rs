//! The two kinds of node a local cluster has, as [`super::up`] meets them: [`KwokNodes`] (Node
//! objects the harness registers and kwok keeps Ready, [`nodes`]) and [`RealNodes`] (kubelets with
//! containerd and kube-proxy in network namespaces of their own, [`real`]). What differs between
//! them — the checks, the images, the certificates, the network, how they start and what runs on
//! them once the CCM has initialised them — is here, so that `up` reads as one sequence.

use std::future::Future;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Node;
use kube::Client;

use super::clouds::{Machine, Machines};
use super::{
    ClusterError, LocalCluster, Result, SERVICE_IP, UpOptions, dns, images, nodes, pki, real, register_nodes,
    wait_for_ready_nodes,
};
use toolchain::Toolchain;

/// What a kind of node needs from the cluster it joins, once its control plane runs.
pub(crate) struct Joining<'a> {
    pub options: &'a UpOptions,
    pub toolchain: &'a Toolchain,
    pub pki: &'a pki::Pki,
    pub api_port: u16,
    pub client: &'a Client,
}

pub(crate) trait NodeSet: Send + Sync {
    /// Checks, before anything starts, that this machine and `options` can have these nodes.
    fn preflight(&self, options: &UpOptions) -> Result<()>;

    /// Builds what the nodes need before the cluster starts (real nodes: their images).
    fn prepare(&mut self, options: &UpOptions, toolchain: &Toolchain) -> impl Future<Output = Result<()>> + Send;

    /// The cluster's certificates: the API server's names, and client certificates for kubelets.
    fn pki(&self, dir: &Path, node_names: &[String]) -> Result<pki::Pki>;

    /// kube-apiserver's egress selector configuration, when it reaches the nodes through a proxy.
    fn egress_config(&self, dir: &Path) -> Result<Option<PathBuf>>;

    /// Control plane components besides etcd and kube-apiserver.
    fn components(&self) -> &'static [&'static str];

    /// The range the nodes' pod CIDRs come from (a CCM's `--cluster-cidr`).
    fn cluster_cidr(&self) -> &'static str;

    /// The machine of node `index` of `cluster`, with the node's addresses.
    fn machine(&self, cluster: &str, index: u32) -> Machine;

    /// Where a cloud takes load-balancer ingress IPs, when not its default pool.
    fn ingress_pool(&self) -> Option<&'static str>;

    /// The machines of `options`' nodes, as their cloud gets them.
    fn machines(&self, options: &UpOptions) -> Machines {
        Machines {
            list: (0..options.nodes).map(|index| self.machine(&options.name, index)).collect(),
            ingress_pool: self.ingress_pool(),
        }
    }

    /// Starts (or registers) the nodes and waits until all are Ready.
    fn start(&self, joining: &Joining<'_>, cluster: &mut LocalCluster) -> impl Future<Output = Result<()>> + Send;

    /// What runs on the nodes once the cluster is up (real nodes: CoreDNS); `wait` for it to be
    /// ready, which it is only once a CCM has initialised the nodes.
    fn start_addons(&self, cluster: &LocalCluster, wait: bool) -> impl Future<Output = Result<()>> + Send;
}

/// Nodes simulated by kwok.
pub(crate) struct KwokNodes;

impl NodeSet for KwokNodes {
    fn preflight(&self, options: &UpOptions) -> Result<()> {
        if options.conformance_image {
            return Err(ClusterError::ConformanceImageNeedsRealNodes);
        }
        if !options.images.is_empty() {
            return Err(ClusterError::ImagesNeedRealNodes);
        }
        if !options.hub_ports.is_empty() {
            return Err(ClusterError::HubPortsNeedRealNodes);
        }
        Ok(())
    }

    async fn prepare(&mut self, _options: &UpOptions, _toolchain: &Toolchain) -> Result<()> {
        Ok(())
    }

    fn pki(&self, dir: &Path, _node_names: &[String]) -> Result<pki::Pki> {
        Ok(pki::generate(dir, SERVICE_IP, &[], &[])?)
    }

    fn egress_config(&self, _dir: &Path) -> Result<Option<PathBuf>> {
        Ok(None)
    }

    fn components(&self) -> &'static [&'static str] {
        &["kube-controller-manager", "kube-scheduler", "kwok"]
    }

    fn cluster_cidr(&self) -> &'static str {
        nodes::CLUSTER_CIDR
    }

    fn machine(&self, cluster: &str, index: u32) -> Machine {
        nodes::machine(cluster, index)
    }

    fn ingress_pool(&self) -> Option<&'static str> {
        None
    }

    async fn start(&self, joining: &Joining<'_>, cluster: &mut LocalCluster) -> Result<()> {
        let options = joining.options;
        let step = cli_support::progress::step(format!("registering {} simulated nodes", options.nodes));
        let version = &joining.toolchain.version;
        let cloud = cluster.state.cloud.clone();
        // Named and addressed as the cloud's kubelets register, when it decides that.
        let manifests: Vec<Node> = (0..options.nodes)
            .map(|index| match cloud.as_ref().and_then(|cloud| cloud.node_identity(index)) {
                Some((name, ips)) => nodes::manifest_with(&name, &ips, index, version),
                None => nodes::manifest(&options.name, index, version),
            })
            .collect();
        cluster.state.nodes = register_nodes(joining.client, &options.name, manifests).await?;
        cluster.save()?;
        wait_for_ready_nodes(joining.client, cluster).await?;
        step.done();
        Ok(())
    }

    async fn start_addons(&self, _cluster: &LocalCluster, _wait: bool) -> Result<()> {
        Ok(())
    }
}

/// Real kubelets, with the images they run and the registry indexes that serve them.
#[derive(Default)]
pub(crate) struct RealNodes {
    images: Vec<images::Image>,
    registry_indexes: Vec<PathBuf>,
}

impl NodeSet for RealNodes {
    fn preflight(&self, options: &UpOptions) -> Result<()> {
        real::preflight(options.nodes, !images::is_cached(&options.release))?;
        real::check_hub_ports(&options.hub_ports, options.api_server_port)?;
        if options.cloud.is_none() {
            return Err(ClusterError::RealNodes(
                "real nodes register as external-cloud-provider kubelets and need a CCM to initialise them: add --cloud local".into(),
            ));
        }
        Ok(())
    }

    async fn prepare(&mut self, options: &UpOptions, toolchain: &Toolchain) -> Result<()> {
        let (toolchain, release, conformance) = (toolchain.clone(), options.release, options.conformance_image);
        let given = options.images.clone();
        let (images, indexes) = tokio::task::spawn_blocking(move || -> std::result::Result<_, images::ImageError> {
            let mut images = images::install(&release, &toolchain)?;
            let mut indexes = vec![images::registry_index(&release)];
            if conformance {
                let (image, index) = images::conformance::install(&release, &toolchain)?;
                images.push(image);
                indexes.push(index);
            }
            for archive in given {
                let reference = images::oci::archive_reference(&archive)?;
                images.push(images::Image { id: images::GIVEN, reference, archive });
            }
            Ok((images, indexes))
        })
        .await
        .expect("image builds do not panic")?;
        (self.images, self.registry_indexes) = (images, indexes);
        Ok(())
    }

    fn pki(&self, dir: &Path, node_names: &[String]) -> Result<pki::Pki> {
        Ok(pki::generate(dir, real::SERVICE_IP, &[real::HUB_IP], node_names)?)
    }

    fn egress_config(&self, dir: &Path) -> Result<Option<PathBuf>> {
        real::write_egress_config(dir).map(Some)
    }

    fn components(&self) -> &'static [&'static str] {
        &["kube-controller-manager", "kube-scheduler"]
    }

    fn cluster_cidr(&self) -> &'static str {
        real::CLUSTER_CIDR
    }

    fn machine(&self, cluster: &str, index: u32) -> Machine {
        real::machine(cluster, index)
    }

    fn ingress_pool(&self) -> Option<&'static str> {
        // On the cluster's own network, where the data plane makes them carry traffic.
        Some(real::LB_POOL)
    }

    /// Starts the hub and one real node per `options.nodes`, waits for them to register, gives
    /// them their pod network and waits until they are Ready.
    async fn start(&self, joining: &Joining<'_>, cluster: &mut LocalCluster) -> Result<()> {
        let options = joining.options;
        let step = cli_support::progress::step(format!(
            "starting {} real nodes (containerd, kubelet, kube-proxy)",
            options.nodes
        ));
        let hub = real::start_hub(joining.toolchain, joining.api_port, &options.hub_ports, cluster)?;
        real::start_registry(joining.toolchain, hub, &self.registry_indexes, cluster)?;
        let names: Vec<String> = (0..options.nodes).map(|index| nodes::node_name(&options.name, index)).collect();
        let certs = NodeCerts::of(&cluster.dir.join("pki"), &names);
        let specs: Vec<real::NodeSpec> =
            names.iter().zip(0..).map(|(name, index)| self.node_spec(joining, name, index, hub, &certs)).collect();
        for spec in &specs {
            real::start_machine(spec, cluster)?;
            cluster.state.nodes.push(spec.name.clone());
        }
        cluster.save()?;
        let cluster_dir = cluster.dir.clone();
        std::thread::scope(|scope| {
            let imports: Vec<_> =
                specs.iter().map(|spec| scope.spawn(|| real::import_images(spec, &cluster_dir))).collect();
            imports.into_iter().try_for_each(|import| import.join().expect("an image import does not panic"))
        })?;
        let mut holders = Vec::new();
        for spec in &specs {
            real::start_agents(spec, cluster)?;
            holders.push((spec.name.clone(), spec.holder(&cluster.state)?));
        }
        cluster.save()?;
        let data_plane = options.cloud.as_ref().and_then(|cloud| cloud.data_plane());
        if let Some(data_plane) = &data_plane {
            real::start_data_plane(data_plane, hub, &holders, cluster)?;
        }
        let cidrs = real::configure_pod_network(joining.client, &cluster.state, &holders, &cluster.dir).await?;
        if data_plane.is_none() {
            // No data plane to program the cloud's routes: routed as a host-gateway CNI would.
            real::route_pod_cidrs(hub, &holders, &cidrs)?;
        }
        wait_for_ready_nodes(joining.client, cluster).await?;
        step.done();
        Ok(())
    }

    async fn start_addons(&self, cluster: &LocalCluster, wait: bool) -> Result<()> {
        let step = cli_support::progress::step("starting CoreDNS");
        let client = cluster.client().await?;
        let replicas = cluster.state.nodes.len().min(2) as i32;
        dns::deploy(&client, &cluster.state.name, &images::coredns_reference(), replicas, wait).await?;
        step.done();
        Ok(())
    }
}

/// Each node's client certificate and key, and kube-proxy's (one for every node).
struct NodeCerts {
    nodes: Vec<(PathBuf, PathBuf)>,
    proxy: (PathBuf, PathBuf),
}

impl NodeCerts {
    fn of(pki_dir: &Path, names: &[String]) -> NodeCerts {
        NodeCerts {
            nodes: names.iter().map(|name| pki::node_client(pki_dir, name)).collect(),
            proxy: pki::kube_proxy_client(pki_dir),
        }
    }
}

impl RealNodes {
    /// What node `name` (the `index`th) is started with.
    fn node_spec<'a>(
        &'a self,
        joining: &Joining<'a>,
        name: &str,
        index: u32,
        hub: i32,
        certs: &'a NodeCerts,
    ) -> real::NodeSpec<'a> {
        let (client_cert, client_key) = &certs.nodes[index as usize];
        real::NodeSpec {
            name: name.to_owned(),
            index,
            hub,
            toolchain: joining.toolchain,
            images: &self.images,
            ca_cert: &joining.pki.ca_cert,
            client_cert,
            client_key,
            proxy_cert: &certs.proxy.0,
            proxy_key: &certs.proxy.1,
            api_port: joining.api_port,
            // A node IP the CCM does not report would fail the node's initialisation.
            dual_stack: joining.options.cloud.as_ref().is_none_or(|cloud| cloud.facts().dual_stack),
            system_uuid: real::system_uuid(&joining.options.name, name),
            hub_ports: &joining.options.hub_ports,
        }
    }
}
