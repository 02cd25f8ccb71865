//! `cloud: moto`: the cloud of the `aws` provider. moto's server (EC2, ELB and ELBv2 APIs, from
//! PyPI, installed by `harness toolchain install`) runs as a process of the cluster on loopback;
//! the harness gives it what an AWS cluster has — a VPC, a public subnet per zone (cluster-tagged,
//! `kubernetes.io/role/elb`, routed to an internet gateway), a node security group, and one
//! instance per node whose private IP is the node's IP — and registers each node as an AWS kubelet
//! with `--cloud-provider=external` does: named after its instance's private DNS name, no
//! providerID. The unmodified cloud-provider-aws CCM then finds every instance by itself, through
//! its cloud config's `[ServiceOverride]` endpoints and fake credentials; the cloud config names
//! the region, VPC, subnet and cluster ID, so it never asks the instance metadata service.

pub mod query;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{
    Cloud, CloudError, CloudErrorKind, CloudFacts, CloudKind, CloudSettings, CloudState, InstanceState, LoadBalancers,
    Machines,
};
use crate::machines::MachineAction;
use crate::{ClusterError, LocalCluster, Result, process};
use query::{QueryClient, QueryError, Service, list_params, tag_params};

pub const REGION: &str = "us-east-1";
/// The zones nodes are spread over, round robin, one subnet each.
pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
pub const INSTANCE_TYPE: &str = "t3.medium";
/// An image id for RunInstances (moto runs any).
const IMAGE_ID: &str = "ami-12c6146b";
/// The VPC, on loopback like every address of a local cluster: subnet `z` is `127.1.z.0/24`.
const VPC_CIDR: &str = "127.1.0.0/16";
/// The first host number of each subnet given to an instance (AWS reserves the first four).
const FIRST_HOST: u32 = 10;
/// The most nodes the subnets have addresses for.
pub const MAX_NODES: u32 = ZONES.len() as u32 * (250 - FIRST_HOST);
// providers.yaml is checked against config's figure: the two must agree.
const _: () = assert!(MAX_NODES == config::nodes::MAX_MOTO_NODES);
/// The CCM's `--cloud-config` (gcfg, INI-like), in the cluster dir.
pub const CLOUD_CONFIG: &str = "aws-cloud.conf";
/// The fake credentials the CCM signs its requests with (moto checks none).
const ACCESS_KEY: &str = "harness";

fn facts() -> &'static CloudFacts {
    config::clouds::named("moto").expect("config::clouds lists moto")
}

fn error(kind: CloudErrorKind, what: impl Into<String>, message: impl std::fmt::Display) -> ClusterError {
    CloudError::new(facts(), kind, what, message).into()
}

/// What kind of failure a call to moto is.
fn query_error_kind(error: &QueryError) -> CloudErrorKind {
    match error {
        QueryError::Http { .. } => CloudErrorKind::Unreachable,
        QueryError::Api { status: 404, .. } => CloudErrorKind::NotFound,
        QueryError::Api { .. } | QueryError::Xml { .. } => CloudErrorKind::Refused,
    }
}

/// moto in the registry.
pub struct Moto;

impl CloudKind for Moto {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    fn install(&self, force: bool) -> Result<Vec<String>> {
        let moto = toolchain::aws::install_moto(force)?;
        Ok(vec![format!("moto {}: {}", toolchain::aws::moto_version(), moto.display())])
    }

    fn provider_ccm(&self) -> Option<&'static toolchain::provider_ccm::ProviderCcm> {
        Some(&toolchain::aws::CCM)
    }

    fn prepare(&self, _settings: &CloudSettings) -> Result<Arc<dyn Cloud>> {
        Ok(Arc::new(MotoSetup { moto_server: toolchain::aws::install_moto(false)? }))
    }
}

/// moto, ready to start.
#[derive(Debug, Clone)]
pub struct MotoSetup {
    /// `moto_server` of the virtualenv `harness toolchain install` made.
    pub moto_server: PathBuf,
}

/// What `cluster.json` records of the cluster's AWS cloud.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MotoState {
    /// moto's endpoint, every service on one port.
    pub endpoint: String,
    pub region: String,
    pub vpc_id: String,
    pub subnet_ids: Vec<String>,
    /// Node name (the instance's private DNS name) to instance id.
    pub instances: BTreeMap<String, String>,
    /// The node names in node index order: node `i`'s IP is [`node_ip`]`(i)`.
    pub nodes: Vec<String>,
}

impl MotoState {
    pub fn client(&self) -> QueryClient {
        QueryClient::new(&self.endpoint, &self.region)
    }

    /// The instance of node `node`.
    pub fn instance(&self, node: &str) -> Result<&str> {
        self.instances.get(node).map(String::as_str).ok_or_else(|| {
            let known: Vec<&str> = self.instances.keys().map(String::as_str).collect();
            error(
                CloudErrorKind::NotFound,
                format!("no instance of node {node} in moto; the nodes are: {}", known.join(", ")),
                "",
            )
        })
    }
}

/// Node `index`'s IP: `127.1.<zone>.<10 + index / zones>`, in its zone's subnet.
pub fn node_ip(index: u32) -> Ipv4Addr {
    let zones = ZONES.len() as u32;
    Ipv4Addr::new(127, 1, (index % zones) as u8, (FIRST_HOST + index / zones) as u8)
}

/// Arguments of `moto_server`: every service on one loopback port.
pub fn moto_args(port: u16) -> Vec<String> {
    vec!["-H".into(), "127.0.0.1".into(), "-p".into(), port.to_string()]
}

/// The environment of the CCM: fake static credentials and the region, nothing read from the
/// user's `~/.aws`, and the instance metadata service off (the cloud config makes it unneeded).
pub fn ccm_env() -> Vec<(String, String)> {
    [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", ACCESS_KEY),
        ("AWS_REGION", REGION),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/dev/null"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec()
}

/// Variables of the harness's own environment that would point the CCM's AWS SDK elsewhere.
pub const CCM_ENV_REMOVED: &[&str] =
    &["AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "AWS_ROLE_ARN"];

/// The cluster tag AWS resources of cluster `cluster` carry (`kubernetes.io/cluster/<id>`).
pub fn cluster_tag(cluster: &str) -> String {
    format!("kubernetes.io/cluster/{cluster}")
}

#[async_trait]
impl Cloud for MotoSetup {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    /// Starts moto as the cluster's process `moto`, provisions the cluster's network and one
    /// instance per machine, and writes the CCM's `--cloud-config`.
    async fn start(
        &self,
        cluster: &mut LocalCluster,
        machines: &Machines,
        _client: &kube::Client,
    ) -> Result<Arc<dyn CloudState>> {
        let count = machines.list.len() as u32;
        let step = cli_support::progress::step(format!("starting moto (the aws cloud) with {count} instances"));
        let [port] = crate::free_ports()?;
        cluster.start(&self.moto_server, "moto", moto_args(port))?;
        let moto = QueryClient::new(&format!("http://127.0.0.1:{port}"), REGION);
        wait_ready(&moto, || crate::check_alive(&cluster.state)).await?;
        let name = cluster.state.name.clone();
        let state = provision(&moto, &name, count).await?;
        write_cloud_config(&cluster.dir.join(CLOUD_CONFIG), &state, &name)?;
        step.done();
        Ok(Arc::new(state))
    }
}

#[typetag::serde(name = "moto")]
#[async_trait]
impl CloudState for MotoState {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    fn cloud_config_file(&self) -> &'static str {
        CLOUD_CONFIG
    }

    fn ccm_environment(&self) -> process::Environment {
        process::Environment { set: ccm_env(), removed: CCM_ENV_REMOVED.iter().map(|v| (*v).to_owned()).collect() }
    }

    /// As AWS kubelets register: named after the instance's private DNS name, with its private IP.
    fn node_identity(&self, index: u32) -> Option<(String, Vec<String>)> {
        let name = self.nodes.get(index as usize)?;
        Some((name.clone(), vec![node_ip(index).to_string()]))
    }

    async fn act(&self, node: &str, action: MachineAction) -> Result<InstanceState> {
        let instance_action = match action {
            MachineAction::Shutdown => InstanceAction::Stop,
            MachineAction::Start => InstanceAction::Start,
            MachineAction::Terminate => InstanceAction::Terminate,
        };
        let now = act(self, node, instance_action).await?;
        Ok(InstanceState { id: self.instance(node)?.to_owned(), state: now })
    }

    fn load_balancers(&self) -> Option<&dyn LoadBalancers> {
        Some(self)
    }
}

#[async_trait]
impl LoadBalancers for MotoState {
    async fn list_load_balancers(&self) -> Result<Vec<serde_json::Value>> {
        load_balancers(self).await
    }
}

/// Waits until moto at `endpoint` answers an EC2 call.
pub async fn wait_ready(client: &QueryClient, alive: impl Fn() -> Result<()>) -> Result<()> {
    let started = Instant::now();
    loop {
        alive()?;
        match client.call(Service::Ec2, "DescribeRegions", &[]).await {
            Ok(_) => return Ok(()),
            Err(e) if started.elapsed() > Duration::from_secs(60) => {
                return Err(error(CloudErrorKind::Unreachable, "moto did not answer within 60s", e));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn cloud_err(what: &str) -> impl FnOnce(QueryError) -> ClusterError + '_ {
    move |e| error(query_error_kind(&e), what, e)
}

/// Creates the VPC, its subnets, internet gateway, route table and node security group, and one
/// running instance per node; returns the state to record.
pub async fn provision(client: &QueryClient, cluster: &str, nodes: u32) -> Result<MotoState> {
    if !(1..=MAX_NODES).contains(&nodes) {
        let what = format!("the aws cloud has addresses for 1 to {MAX_NODES} nodes, not {nodes}");
        return Err(error(CloudErrorKind::Invalid, what, ""));
    }
    let tag = cluster_tag(cluster);
    let owned = [(tag.as_str(), "owned")];
    let tagged = |resource: &str, extra: &[(&str, &str)]| {
        let mut params = vec![("TagSpecification.1.ResourceType".to_owned(), resource.to_owned())];
        let tags: Vec<(&str, &str)> = owned.iter().chain(extra).copied().collect();
        params.extend(tag_params("TagSpecification.1.Tag", &tags));
        params
    };
    let param = |k: &str, v: &str| (k.to_owned(), v.to_owned());

    let mut params = vec![param("CidrBlock", VPC_CIDR)];
    params.extend(tagged("vpc", &[]));
    let vpc = client.call(Service::Ec2, "CreateVpc", &params).await.map_err(cloud_err("creating the VPC"))?;
    let vpc_id = vpc.at("vpc/vpcId").map(|e| e.text.clone()).unwrap_or_default();

    let params = tagged("internet-gateway", &[]);
    let igw = client
        .call(Service::Ec2, "CreateInternetGateway", &params)
        .await
        .map_err(cloud_err("creating the internet gateway"))?;
    let igw_id = igw.at("internetGateway/internetGatewayId").map(|e| e.text.clone()).unwrap_or_default();
    let attach = [param("InternetGatewayId", &igw_id), param("VpcId", &vpc_id)];
    client.call(Service::Ec2, "AttachInternetGateway", &attach).await.map_err(cloud_err("attaching the gateway"))?;

    let mut params = vec![param("VpcId", &vpc_id)];
    params.extend(tagged("route-table", &[]));
    let table =
        client.call(Service::Ec2, "CreateRouteTable", &params).await.map_err(cloud_err("creating the route table"))?;
    let table_id = table.at("routeTable/routeTableId").map(|e| e.text.clone()).unwrap_or_default();
    let route =
        [param("RouteTableId", &table_id), param("DestinationCidrBlock", "0.0.0.0/0"), param("GatewayId", &igw_id)];
    client.call(Service::Ec2, "CreateRoute", &route).await.map_err(cloud_err("routing to the internet gateway"))?;

    let mut subnet_ids = Vec::new();
    for (z, zone) in ZONES.iter().enumerate() {
        let mut params = vec![
            param("VpcId", &vpc_id),
            param("CidrBlock", &format!("127.1.{z}.0/24")),
            param("AvailabilityZone", zone),
        ];
        params.extend(tagged("subnet", &[("kubernetes.io/role/elb", "1")]));
        let subnet =
            client.call(Service::Ec2, "CreateSubnet", &params).await.map_err(cloud_err("creating a subnet"))?;
        let subnet_id = subnet.at("subnet/subnetId").map(|e| e.text.clone()).unwrap_or_default();
        let associate = [param("RouteTableId", &table_id), param("SubnetId", &subnet_id)];
        client
            .call(Service::Ec2, "AssociateRouteTable", &associate)
            .await
            .map_err(cloud_err("associating the route table"))?;
        subnet_ids.push(subnet_id);
    }

    let mut params = vec![
        param("GroupName", &format!("{cluster}-nodes")),
        param("GroupDescription", &format!("nodes of cluster {cluster}")),
        param("VpcId", &vpc_id),
    ];
    params.extend(tagged("security-group", &[]));
    let group = client
        .call(Service::Ec2, "CreateSecurityGroup", &params)
        .await
        .map_err(cloud_err("creating the node group"))?;
    let group_id = group.text_of("groupId").to_owned();

    let mut instances = BTreeMap::new();
    let mut names = Vec::new();
    for index in 0..nodes {
        let ip = node_ip(index).to_string();
        let mut params = vec![
            param("ImageId", IMAGE_ID),
            param("InstanceType", INSTANCE_TYPE),
            param("MinCount", "1"),
            param("MaxCount", "1"),
            param("SubnetId", &subnet_ids[index as usize % ZONES.len()]),
            param("PrivateIpAddress", &ip),
        ];
        params.extend(list_params("SecurityGroupId", &[&group_id]));
        params.extend(tagged("instance", &[("Name", &format!("{cluster}-node-{index}"))]));
        let run = client.call(Service::Ec2, "RunInstances", &params).await.map_err(cloud_err("running an instance"))?;
        let instance = run.items("instancesSet").into_iter().next().ok_or_else(|| {
            error(CloudErrorKind::Refused, format!("moto's RunInstances answered no instance for node {index}"), "")
        })?;
        let name = instance.text_of("privateDnsName").to_owned();
        if name.is_empty() {
            let what = format!("moto gave instance {} no private DNS name", instance.text_of("instanceId"));
            return Err(error(CloudErrorKind::Refused, what, ""));
        }
        instances.insert(name.clone(), instance.text_of("instanceId").to_owned());
        names.push(name);
    }
    Ok(MotoState {
        endpoint: client.endpoint().to_owned(),
        region: REGION.into(),
        vpc_id,
        subnet_ids,
        instances,
        nodes: names,
    })
}

/// The CCM's `--cloud-config`: the VPC, subnet, region and cluster ID (so the CCM never asks the
/// instance metadata service who it is), and every service it calls overridden to moto.
pub fn cloud_config(state: &MotoState, cluster: &str) -> String {
    let mut text = format!(
        "[Global]\nRegion = {region}\nVPC = {vpc}\nSubnetID = {subnet}\nKubernetesClusterID = {cluster}\n",
        region = state.region,
        vpc = state.vpc_id,
        subnet = state.subnet_ids[0],
    );
    // The service ids of the AWS SDK for Go v2 and their signing names.
    let services = [
        ("EC2", "ec2"),
        ("Elastic Load Balancing", "elasticloadbalancing"),
        ("Elastic Load Balancing v2", "elasticloadbalancing"),
        ("KMS", "kms"),
    ];
    for (n, (service, signing_name)) in services.iter().enumerate() {
        text.push_str(&format!(
            "\n[ServiceOverride \"{n}\"]\nService = {service}\nRegion = {region}\nURL = {url}\nSigningRegion = {region}\nSigningName = {signing_name}\n",
            n = n + 1,
            region = state.region,
            url = state.endpoint,
        ));
    }
    text
}

pub fn write_cloud_config(path: &Path, state: &MotoState, cluster: &str) -> Result<()> {
    std::fs::write(path, cloud_config(state, cluster)).map_err(crate::io_err("writing", path))
}

/// What happens to an instance.
#[derive(Debug, Clone, Copy)]
pub enum InstanceAction {
    Stop,
    Start,
    Terminate,
}

/// Stops, starts or terminates node `node`'s instance; returns its state afterwards as moto reports it.
pub async fn act(state: &MotoState, node: &str, action: InstanceAction) -> Result<String> {
    let instance = state.instance(node)?;
    let call = match action {
        InstanceAction::Stop => "StopInstances",
        InstanceAction::Start => "StartInstances",
        InstanceAction::Terminate => "TerminateInstances",
    };
    let answer = state
        .client()
        .call(Service::Ec2, call, &list_params("InstanceId", &[instance]))
        .await
        .map_err(|e| error(query_error_kind(&e), format!("{call} of {instance} (node {node})"), e))?;
    Ok(answer
        .items("instancesSet")
        .first()
        .and_then(|i| i.at("currentState/name"))
        .map(|e| e.text.clone())
        .unwrap_or_default())
}

/// moto's classic load balancers, each as JSON: its name, DNS name, instances (and the nodes they
/// are), listeners, and the source ranges of its security groups.
pub async fn load_balancers(state: &MotoState) -> Result<Vec<serde_json::Value>> {
    let client = state.client();
    let answer =
        client.call(Service::Elb, "DescribeLoadBalancers", &[]).await.map_err(cloud_err("listing load balancers"))?;
    let nodes: BTreeMap<&str, &str> = state.instances.iter().map(|(n, i)| (i.as_str(), n.as_str())).collect();
    let mut balancers = Vec::new();
    for lb in answer.items("DescribeLoadBalancersResult/LoadBalancerDescriptions") {
        let instances: Vec<&str> = lb.items("Instances").iter().map(|i| i.text_of("InstanceId")).collect();
        let backends: Vec<&str> = instances.iter().filter_map(|i| nodes.get(i).copied()).collect();
        let listeners: Vec<serde_json::Value> = lb
            .items("ListenerDescriptions")
            .iter()
            .filter_map(|d| d.child("Listener"))
            .map(|l| {
                serde_json::json!({
                    "protocol": l.text_of("Protocol"),
                    "port": l.text_of("LoadBalancerPort"),
                    "instance_port": l.text_of("InstancePort"),
                })
            })
            .collect();
        let groups: Vec<&str> = lb.items("SecurityGroups").iter().map(|g| g.text.as_str()).collect();
        let source_ranges = if groups.is_empty() { Vec::new() } else { ingress_ranges(&client, &groups).await? };
        balancers.push(serde_json::json!({
            "name": lb.text_of("LoadBalancerName"),
            "dns_name": lb.text_of("DNSName"),
            "scheme": lb.text_of("Scheme"),
            "instances": instances,
            "backends": backends,
            "listeners": listeners,
            "security_groups": groups,
            "source_ranges": source_ranges,
        }));
    }
    Ok(balancers)
}

/// The IPv4 CIDRs the security groups `groups` let in.
async fn ingress_ranges(client: &QueryClient, groups: &[&str]) -> Result<Vec<String>> {
    // By filter, not by id: a group deleted since (with its load balancer) is then left out
    // rather than failing the whole listing.
    let mut params = vec![("Filter.1.Name".to_owned(), "group-id".to_owned())];
    params.extend(list_params("Filter.1.Value", groups));
    let answer = client
        .call(Service::Ec2, "DescribeSecurityGroups", &params)
        .await
        .map_err(cloud_err("describing load balancer security groups"))?;
    let mut ranges: Vec<String> = answer
        .items("securityGroupInfo")
        .iter()
        .flat_map(|g| g.items("ipPermissions"))
        .flat_map(|p| p.items("ipRanges"))
        .map(|r| r.text_of("cidrIp").to_owned())
        .collect();
    ranges.sort();
    ranges.dedup();
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ips_are_on_loopback_in_their_zones_subnet_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for index in 0..MAX_NODES {
            let ip = node_ip(index);
            assert!(ip.is_loopback());
            assert_eq!(ip.octets()[2] as u32, index % ZONES.len() as u32, "{ip}");
            assert!(ip.octets()[3] >= FIRST_HOST as u8 && ip.octets()[3] < 255, "{ip}");
            assert!(seen.insert(ip), "{ip}");
        }
    }

    #[tokio::test]
    async fn a_dead_endpoint_or_an_unknown_node_is_an_error_that_says_what_to_check() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let state = MotoState {
            endpoint: endpoint.clone(),
            region: REGION.into(),
            vpc_id: "vpc-1".into(),
            subnet_ids: vec!["subnet-1".into()],
            instances: [("ip-127-1-0-10.ec2.internal".to_owned(), "i-1".to_owned())].into(),
            nodes: vec!["ip-127-1-0-10.ec2.internal".into()],
        };
        let error = act(&state, "ip-127-1-0-10.ec2.internal", InstanceAction::Stop).await.unwrap_err().to_string();
        assert!(error.contains("StopInstances") && error.contains(&endpoint), "{error}");
        assert!(error.contains("is the cloud (moto) still running?"), "{error}");
        let error = act(&state, "no-such-node", InstanceAction::Terminate).await.unwrap_err().to_string();
        assert!(error.contains("no instance of node no-such-node") && error.contains("ip-127-1-0-10"), "{error}");
        let error = load_balancers(&state).await.unwrap_err().to_string();
        assert!(error.contains("listing load balancers") && error.contains("DescribeLoadBalancers"), "{error}");
    }

    #[test]
    fn the_cloud_config_overrides_every_service_to_moto() {
        let state = MotoState {
            endpoint: "http://127.0.0.1:5000".into(),
            region: REGION.into(),
            vpc_id: "vpc-1".into(),
            subnet_ids: vec!["subnet-1".into()],
            instances: BTreeMap::new(),
            nodes: Vec::new(),
        };
        let text = cloud_config(&state, "c1");
        for line in ["VPC = vpc-1", "SubnetID = subnet-1", "KubernetesClusterID = c1", "Region = us-east-1"] {
            assert!(text.contains(line), "{text}");
        }
        for service in ["EC2", "Elastic Load Balancing", "Elastic Load Balancing v2"] {
            assert!(text.contains(&format!("Service = {service}\n")), "{text}");
        }
        assert_eq!(text.matches("URL = http://127.0.0.1:5000\n").count(), 4, "{text}");
        assert_eq!(text.matches("[ServiceOverride \"").count(), 4);
    }
}
