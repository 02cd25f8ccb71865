//! Real nodes (`--node-kind real`): each node is a kubelet and a containerd (running pods through
//! runc and the CNI bridge plugin) in a network and mount namespace of its own; no Docker, no
//! registry, and nothing in the machine's root network namespace changes.
//!
//! Layout, per cluster:
//! - a *hub* network namespace holding bridge `br0` ([`HUB_IP`]/24): the cluster's own network.
//!   Each node has a veth pair, `eth0` in the node at [`node_ip`] and its peer on the bridge; the
//!   node's default route leads to the hub, which has no route out, so nothing leaves the cluster.
//!   Routes between the nodes' pod CIDRs are the local cloud's: its data plane
//!   (`reference-ccm local-cloud data-plane`, run inside the hub) programs the route controller's
//!   routes into every node and the hub, and its load balancers' ingress IPs ([`LB_POOL`]) into
//!   the hub (DNAT to the backends' NodePorts).
//! - the control plane stays on loopback in the root namespace. `netproxy` carries traffic across
//!   through Unix sockets (which cross network namespaces): in the hub it forwards
//!   `HUB_IP:<api port>` (the address kube-apiserver advertises) to the API server, and serves
//!   HTTP CONNECT for kube-apiserver's egress selector, so logs, exec and proxy reach kubelets.
//! - each node's mount namespace has a private `/run` (tmpfs; runc state, pod netns handles),
//!   its own `/var/lib` and `/var/log` (directories of the node's state dir), and plain files bound
//!   over the global sysctls kubelet writes, so the host keeps its values.
//! - cgroups: every hierarchy gets `/<cgroup prefix>/<node>` (the prefix derived from the cluster's
//!   state dir, so parallel clusters never share one and a crashed run's are found again), each
//!   node's kubelet `cgroupRoot`.
//!
//! Every namespace is held by a process of the cluster (`unshare ... tail -f <state dir>/...`), so
//! stopping the processes frees the namespaces, their links and their mounts; [`cleanup`] then kills
//! what names the cluster's socket dir (the runc shims), what is left in its cgroups, and removes
//! both. Unix sockets live in [`socket_dir`] (`/tmp/<cgroup prefix>`): a socket's path has at most
//! 107 bytes, which a state dir under a home directory and a 40-character cluster name exceed.

use std::fs;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use sha2::{Digest, Sha256};

use super::images::Image;
use super::images::oci::RegistryIndex;
use super::{ClusterError, ClusterState, LocalCluster, Result, io_err, nodes, process};
use toolchain::Toolchain;

/// The hub's address on the cluster network, which kube-apiserver advertises.
pub const HUB_IP: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
/// The range the nodes' pod CIDRs (/24 each) are allocated from.
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
/// The service range of a cluster with real nodes (only ever routed inside its namespaces).
pub const SERVICE_CIDR: &str = "10.96.0.0/16";
pub const SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// Where the local cloud hands load balancer ingress IPs out of for a cluster with real nodes:
/// routed to the hub, which the data plane programs (`reference-ccm local-cloud data-plane`).
pub const LB_POOL: &str = "10.250.1.0/24";
/// The most real nodes a cluster has: addresses `.10` to `.209` of the hub network.
pub const MAX_NODES: u32 = config::nodes::MAX_REAL_NODES;
/// What one real node needs of memory (containerd, kubelet and a few pods), for the up-front check.
const MEMORY_PER_NODE: u64 = 400 << 20;

/// Binaries real nodes run from the machine (Debian packages), with the package that has each.
const HOST_TOOLS: &[(&str, &str)] = &[
    ("/usr/sbin/runc", "runc"),
    ("/usr/lib/cni/bridge", "containernetworking-plugins"),
    ("/usr/lib/cni/host-local", "containernetworking-plugins"),
    ("/usr/lib/cni/portmap", "containernetworking-plugins"),
    ("/usr/lib/cni/loopback", "containernetworking-plugins"),
    ("/usr/bin/nsenter", "util-linux"),
    ("/usr/bin/unshare", "util-linux"),
    ("/usr/sbin/ip", "iproute2"),
    ("/usr/sbin/iptables", "iptables"),
];

/// The Debian packages of [`HOST_TOOLS`] and of the commands the nodes' setup runs through `sh`
/// (mount, awk, grep, sort, xargs): what an image that runs real nodes carries.
pub const NODE_PACKAGES: &[&str] = &[
    "runc",
    "containernetworking-plugins",
    "util-linux",
    "mount",
    "iproute2",
    "iptables",
    "dash",
    "coreutils",
    "findutils",
    "grep",
    "mawk",
];

/// What building the node images needs from the machine, when they are not cached.
const IMAGE_BUILD_TOOLS: &[(&str, &str)] = &[
    ("/usr/bin/gcc", "gcc"),
    // The busybox image's busybox is built from source (cluster/images/busybox.rs).
    ("/usr/bin/make", "make"),
    ("/bin/bzip2", "bzip2"),
    // The Debian-based images (nginx, glibc-dns-testing) are unpacked from downloaded packages.
    ("/usr/bin/apt-get", "apt"),
    ("/usr/bin/dpkg-deb", "dpkg"),
];

/// Sysctls outside the network namespace that kubelet sets; each node binds a file over them.
const MASKED_SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

const CGROUP_FS: &str = "/sys/fs/cgroup";

/// The machine real node `index` of `cluster` has in its cloud: its name and addresses on the hub network.
pub fn machine(cluster: &str, index: u32) -> crate::clouds::Machine {
    crate::clouds::Machine {
        index,
        name: super::nodes::node_name(cluster, index),
        ipv4: node_ip(index),
        ipv6: node_ipv6(index),
    }
}

/// Node `index`'s address on the hub network: 10.250.0.10, 10.250.0.11, ...
pub fn node_ip(index: u32) -> Ipv4Addr {
    assert!(index < MAX_NODES, "node index {index} beyond {MAX_NODES}");
    Ipv4Addr::new(10, 250, 0, 10 + index as u8)
}

/// Node `index`'s IPv6 address on its link (unique-local, RFC 4193; nothing routes it anywhere):
/// nodes are dual-stack, as kwok's are, though pods and Services are IPv4 only.
pub fn node_ipv6(index: u32) -> Ipv6Addr {
    assert!(index < MAX_NODES, "node index {index} beyond {MAX_NODES}");
    Ipv6Addr::new(0xfd00, 0x250, 0, 0, 0, 0, 0, 10 + index as u16)
}

/// Checks, before anything starts, that this machine can run `count` real nodes.
/// `building_images`: the release's node images are not cached, so they are built first.
pub fn preflight(count: u32, building_images: bool) -> Result<()> {
    let fail = |reason: String| Err(ClusterError::RealNodes(reason));
    if count > MAX_NODES {
        return fail(format!("--nodes {count}: a cluster has at most {MAX_NODES} real nodes"));
    }
    if fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap_or(1) != 0 {
        return fail(
            "real nodes need root (namespaces, mounts and cgroups); run as root or use --node-kind kwok".into(),
        );
    }
    let build_tools = if building_images { IMAGE_BUILD_TOOLS } else { &[] };
    let missing: Vec<String> = HOST_TOOLS
        .iter()
        .chain(build_tools)
        .filter(|(path, _)| !Path::new(path).exists())
        .map(|(path, package)| format!("{path} (Debian package {package})"))
        .collect();
    if !missing.is_empty() {
        return fail(format!(
            "missing on this machine: {}; `scripts/test` installs them, or apt-get install the packages named",
            missing.join(", ")
        ));
    }
    if let Some(missing) = missing_kernel_feature() {
        return fail(missing);
    }
    let available = available_memory();
    if let Some(available) = available
        && available < u64::from(count) * MEMORY_PER_NODE
    {
        return fail(format!(
            "--nodes {count} needs about {} MiB of memory for real nodes, and {} MiB are available; use fewer nodes or --node-kind kwok",
            (u64::from(count) * MEMORY_PER_NODE) >> 20,
            available >> 20
        ));
    }
    Ok(())
}

fn available_memory() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// Whether the machine runs cgroup v2 only (then kubelet needs no `failCgroupV1: false`).
pub fn cgroup_v2() -> bool {
    Path::new(CGROUP_FS).join("cgroup.controllers").exists()
}

/// The cgroup hierarchies to make node roots in: every v1 controller mount and a hybrid host's
/// cgroup2 mount (or the v2 root on a v2 host).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    if cgroup_v2() {
        return vec![PathBuf::from(CGROUP_FS)];
    }
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mount_point = left.split_whitespace().nth(4)?;
            // A hybrid host's cgroup2 mount (`unified`) too: runc makes the containers' cgroups there.
            let cgroup = fstype == "cgroup" || fstype == "cgroup2";
            (cgroup && mount_point.starts_with(CGROUP_FS)).then(|| PathBuf::from(mount_point))
        })
        .collect()
}

/// The name of the cluster's cgroup in every hierarchy: from its state dir, so that a cluster found
/// again after a crash finds its cgroups too, and two state dirs never share one.
pub fn cgroup_prefix(cluster_dir: &Path) -> String {
    let hash = hex::encode(Sha256::digest(cluster_dir.as_os_str().as_encoded_bytes()));
    format!("harness-{}", &hash[..12])
}

fn node_cgroup(cluster_dir: &Path, node: &str) -> String {
    format!("/{}/{node}", cgroup_prefix(cluster_dir))
}

/// The directory of the real-node layer in the cluster dir.
fn real_dir(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join("real")
}

fn node_dir(cluster_dir: &Path, node: &str) -> PathBuf {
    real_dir(cluster_dir).join(node)
}

/// Where the cluster's Unix sockets live: `/tmp/<cgroup prefix>`, short whatever the state dir's
/// path (a socket's path has at most 107 bytes), and seen alike from the root mount namespace and
/// the nodes' (which have a `/run` of their own). Every process that names it is the cluster's.
pub fn socket_dir(cluster_dir: &Path) -> PathBuf {
    Path::new("/tmp").join(cgroup_prefix(cluster_dir))
}

/// The Unix socket of kube-apiserver's egress (HTTP CONNECT into the hub).
pub fn egress_socket(cluster_dir: &Path) -> PathBuf {
    socket_dir(cluster_dir).join("egress.sock")
}

/// Node `index`'s containerd socket (its ttrpc socket is this with `.ttrpc` appended).
fn containerd_socket(cluster_dir: &Path, index: u32) -> PathBuf {
    socket_dir(cluster_dir).join(format!("containerd-{index}.sock"))
}

/// kube-apiserver's `--egress-selector-config-file`: traffic to the cluster (kubelets, pods,
/// services) goes through `netproxy -connect` in the hub.
pub fn write_egress_config(cluster_dir: &Path) -> Result<PathBuf> {
    let dir = real_dir(cluster_dir);
    fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    let path = dir.join("egress-selector.yaml");
    let text = format!(
        "apiVersion: apiserver.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\negressSelections:\n- name: cluster\n  connection:\n    proxyProtocol: HTTPConnect\n    transport:\n      uds:\n        udsName: {}\n",
        egress_socket(cluster_dir).display()
    );
    fs::write(&path, text).map_err(io_err("writing", &path))?;
    Ok(path)
}

/// Runs a command to its end; a failure is an error naming what it was for.
pub(super) fn run(what: &str, command: &mut Command) -> Result<String> {
    let output = command.output().map_err(|e| ClusterError::RealNodes(format!("{what}: running {command:?}: {e}")))?;
    if !output.status.success() {
        return Err(ClusterError::RealNodes(format!(
            "{what}: {command:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `nsenter` into the namespaces of `holder` (network, and mount with `mount`), then `program`.
fn nsenter(holder: i32, mount: bool, program: &str) -> Command {
    let mut command = Command::new("nsenter");
    command.arg(format!("--net=/proc/{holder}/ns/net"));
    if mount {
        command.arg(format!("--mount=/proc/{holder}/ns/mnt"));
    }
    command.arg("--").arg(program);
    command
}

/// Starts a process that holds new namespaces open (`unshare ... tail -f <marker>`), and returns its PID.
fn start_holder(component: &str, marker: &Path, mount: bool, cluster: &mut LocalCluster) -> Result<i32> {
    fs::write(marker, "").map_err(io_err("writing", marker))?;
    let mut args = vec!["--net".to_string()];
    if mount {
        args.extend(["--mount".into(), "--propagation".into(), "private".into()]);
    }
    args.extend(["--".into(), "tail".into(), "-f".into(), marker.display().to_string()]);
    cluster.start(Path::new("/usr/bin/unshare"), component, args)?;
    let pid = cluster.state.processes.last().expect("just started").pid;
    // Until unshare has exec'd tail, the namespaces may not be there yet.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let own = fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        let mine = fs::read_link("/proc/self/ns/net").ok();
        if own.is_some() && own != mine {
            return Ok(pid);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    super::check_alive(&cluster.state)?;
    Err(ClusterError::RealNodes(format!("{component} did not enter new namespaces")))
}

/// Starts the hub namespace with its bridge and the two `netproxy`s. `api_port` is kube-apiserver's
/// port on 127.0.0.1, forwarded to `HUB_IP:api_port` in the hub, as is each of `host_ports`.
pub(super) fn start_hub(
    toolchain: &Toolchain,
    api_port: u16,
    host_ports: &[u16],
    cluster: &mut LocalCluster,
) -> Result<i32> {
    let dir = real_dir(&cluster.dir);
    fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    let hub = start_holder("hub", &dir.join("hub.holder"), false, cluster)?;
    let ip = |args: &[&str]| run("setting up the hub network", nsenter(hub, false, "ip").args(args));
    ip(&["link", "set", "lo", "up"])?;
    ip(&["link", "add", "br0", "type", "bridge"])?;
    ip(&["addr", "add", &format!("{HUB_IP}/24"), "dev", "br0"])?;
    ip(&["link", "set", "br0", "up"])?;

    let sockets = socket_dir(&cluster.dir);
    fs::create_dir_all(&sockets).map_err(io_err("creating", &sockets))?;
    let netproxy = toolchain.binary("netproxy");
    let mut root_args = Vec::new();
    let mut hub_args = vec![
        format!("--net=/proc/{hub}/ns/net"),
        "--".into(),
        netproxy.display().to_string(),
        format!("-connect=unix:{}", egress_socket(&cluster.dir).display()),
    ];
    for (port, socket) in hub_forwards(&sockets, api_port, host_ports) {
        root_args.push(format!("-forward=unix:{}=tcp:127.0.0.1:{port}", socket.display()));
        hub_args.push(format!("-forward=tcp:{HUB_IP}:{port}=unix:{}", socket.display()));
    }
    cluster.start(&netproxy, "netproxy-root", root_args)?;
    cluster.start(Path::new("/usr/bin/nsenter"), "netproxy-hub", hub_args)?;
    Ok(hub)
}

/// Refuses `--hub-port`s the hub cannot listen on: 0, one given twice, kube-apiserver's own and
/// the cluster's registry's.
pub fn check_hub_ports(ports: &[u16], api_server_port: Option<u16>) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for port in ports {
        let why = if *port == 0 {
            "is no port"
        } else if Some(*port) == api_server_port {
            "is kube-apiserver's (--api-server-port), which the hub forwards already"
        } else if *port == REGISTRY_PORT {
            "is the cluster's registry's on the hub (the registry.k8s.io mirror): serve the service on another port"
        } else if !seen.insert(port) {
            "is given twice"
        } else {
            continue;
        };
        return Err(ClusterError::RealNodes(format!("--hub-port {port} {why}: give each service's port once")));
    }
    Ok(())
}

/// The ports the hub forwards to this machine's loopback, each through its Unix socket in
/// `sockets`: kube-apiserver's, then the host's services'.
fn hub_forwards(sockets: &Path, api_port: u16, host_ports: &[u16]) -> Vec<(u16, PathBuf)> {
    let api = (api_port, sockets.join("apiserver.sock"));
    std::iter::once(api)
        .chain(host_ports.iter().map(|port| (*port, sockets.join(format!("host-{port}.sock")))))
        .collect()
}

/// One real node as `up` starts it.
pub struct NodeSpec<'a> {
    pub name: String,
    pub index: u32,
    pub hub: i32,
    pub toolchain: &'a Toolchain,
    pub images: &'a [Image],
    pub ca_cert: &'a Path,
    pub client_cert: &'a Path,
    pub client_key: &'a Path,
    pub proxy_cert: &'a Path,
    pub proxy_key: &'a Path,
    pub api_port: u16,
    /// Whether the kubelet's `--node-ip` names the node's IPv6 address too (a dual-stack node).
    pub dual_stack: bool,
    /// The machine's BIOS UUID, which kubelet reports as the node's `systemUUID` ([`system_uuid`]).
    pub system_uuid: String,
    /// The host's services forwarded into the hub (`UpOptions::hub_ports`): each may be a
    /// registry, which containerd pulls from over plain HTTP.
    pub hub_ports: &'a [u16],
}

impl NodeSpec<'_> {
    /// The PID holding the node's namespaces, which [`start_machine`] started.
    pub(super) fn holder(&self, state: &ClusterState) -> Result<i32> {
        let component = format!("{}-namespaces", self.name);
        let holder = state.processes.iter().find(|p| p.component == component).map(|p| p.pid);
        holder.ok_or_else(|| ClusterError::RealNodes(format!("node {} has no namespaces yet", self.name)))
    }
}

/// Starts node `spec`'s machine: its namespaces, link, mounts, cgroups and containerd, and waits
/// until containerd serves. Then [`import_images`], then [`start_agents`].
pub(super) fn start_machine(spec: &NodeSpec, cluster: &mut LocalCluster) -> Result<()> {
    let dir = node_dir(&cluster.dir, &spec.name);
    for sub in ["var-lib", "var-log", "sysctl", "cni"] {
        fs::create_dir_all(dir.join(sub)).map_err(io_err("creating", &dir.join(sub)))?;
    }
    let holder = start_holder(&format!("{}-namespaces", spec.name), &dir.join("holder"), true, cluster)?;
    wire_node(spec, holder)?;
    mount_node(&dir, holder, &spec.system_uuid)?;
    make_cgroups(&node_cgroup(&cluster.dir, &spec.name))?;

    let containerd_config = write_containerd_config(&dir, &containerd_socket(&cluster.dir, spec.index), spec)?;
    let socket = containerd_socket(&cluster.dir, spec.index);
    let mut args = vec![format!("--net=/proc/{holder}/ns/net"), format!("--mount=/proc/{holder}/ns/mnt"), "--".into()];
    args.extend([
        spec.toolchain.binary("containerd").display().to_string(),
        format!("--config={}", containerd_config.display()),
    ]);
    let env = node_env(spec.toolchain);
    cluster.start_with_env(Path::new("/usr/bin/nsenter"), &format!("{}-containerd", spec.name), args, &env)?;
    wait_for_socket(&socket, &cluster.state)
}

/// Starts node `spec`'s kubelet, which registers the node with the API server, and kube-proxy.
pub(super) fn start_agents(spec: &NodeSpec, cluster: &mut LocalCluster) -> Result<()> {
    let dir = node_dir(&cluster.dir, &spec.name);
    let holder = spec.holder(&cluster.state)?;
    let env = node_env(spec.toolchain);
    let kubelet_config = write_kubelet_config(&dir, spec, &cluster.dir)?;
    let kubeconfig = write_node_kubeconfig(&dir, spec)?;
    let mut args = vec![format!("--net=/proc/{holder}/ns/net"), format!("--mount=/proc/{holder}/ns/mnt"), "--".into()];
    args.extend([
        spec.toolchain.binary("kubelet").display().to_string(),
        format!("--config={}", kubelet_config.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--hostname-override={}", spec.name),
        match spec.dual_stack {
            true => format!("--node-ip={},{}", node_ip(spec.index), node_ipv6(spec.index)),
            false => format!("--node-ip={}", node_ip(spec.index)),
        },
        "--cloud-provider=external".into(),
        "--v=1".into(),
    ]);
    cluster.start_with_env(Path::new("/usr/bin/nsenter"), &format!("{}-kubelet", spec.name), args, &env)?;

    let proxy_config = write_kube_proxy_config(&dir, spec)?;
    let mut args = vec![format!("--net=/proc/{holder}/ns/net"), format!("--mount=/proc/{holder}/ns/mnt"), "--".into()];
    args.extend([
        spec.toolchain.binary("kube-proxy").display().to_string(),
        format!("--config={}", proxy_config.display()),
        format!("--hostname-override={}", spec.name),
    ]);
    cluster.start_with_env(Path::new("/usr/bin/nsenter"), &format!("{}-kube-proxy", spec.name), args, &env)?;
    Ok(())
}

/// kube-proxy in iptables mode, in the node's network namespace. It leaves conntrack's limits and
/// timeouts alone: outside the machine's first network namespace they are the host's, read-only.
fn write_kube_proxy_config(dir: &Path, spec: &NodeSpec) -> Result<PathBuf> {
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": format!("https://{HUB_IP}:{}", spec.api_port),
            "certificate-authority": spec.ca_cert,
        }}],
        "users": [{"name": "kube-proxy", "user": {
            "client-certificate": spec.proxy_cert,
            "client-key": spec.proxy_key,
        }}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "kube-proxy"}}],
        "current-context": "local",
    });
    let kubeconfig_path = dir.join("kube-proxy.kubeconfig");
    fs::write(&kubeconfig_path, serde_json::to_vec_pretty(&kubeconfig).expect("serialises"))
        .map_err(io_err("writing", &kubeconfig_path))?;
    let config = serde_json::json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig_path},
        "mode": "iptables",
        "clusterCIDR": CLUSTER_CIDR,
        "bindAddress": node_ip(spec.index).to_string(),
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    });
    let path = dir.join("kube-proxy.yaml");
    fs::write(&path, serde_json::to_vec_pretty(&config).expect("serialises")).map_err(io_err("writing", &path))?;
    Ok(path)
}

/// The environment of a node's processes: its `PATH`.
fn node_env(toolchain: &Toolchain) -> process::Environment {
    process::Environment { set: vec![("PATH".into(), node_path(toolchain))], removed: Vec::new() }
}

/// containerd finds its own runc shim first, then runc and the system tools.
fn node_path(toolchain: &Toolchain) -> String {
    format!("{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", toolchain.dir.join("bin").display())
}

/// The node's veth pair (`eth0` in the node, `n<index>` on the hub's bridge), address and routes.
fn wire_node(spec: &NodeSpec, holder: i32) -> Result<()> {
    let what = format!("wiring node {}", spec.name);
    let peer = format!("n{}", spec.index);
    let hub = |args: &[&str]| run(&what, nsenter(spec.hub, false, "ip").args(args));
    hub(&["link", "add", &peer, "type", "veth", "peer", "name", "eth0", "netns", &holder.to_string()])?;
    hub(&["link", "set", &peer, "master", "br0", "up"])?;
    let node = |args: &[&str]| run(&what, nsenter(holder, false, "ip").args(args));
    node(&["link", "set", "lo", "up"])?;
    node(&["addr", "add", &format!("{}/24", node_ip(spec.index)), "dev", "eth0"])?;
    node(&["addr", "add", &format!("{}/64", node_ipv6(spec.index)), "dev", "eth0", "nodad"])?;
    node(&["link", "set", "eth0", "up"])?;
    node(&["route", "add", "default", "via", &HUB_IP.to_string()])?;
    // The machine's nameservers are out of the cluster's reach (the hub has no route out), and a
    // dropped query waits out the resolver's timeouts: 50 s for each pull of an image the mirror
    // lacks. Refused at once, as on an offline machine.
    let resolv_conf = fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    for nameserver in unreachable_nameservers(&resolv_conf) {
        node(&["route", "add", "unreachable", &format!("{nameserver}/32")])?;
    }
    // Per network namespace: the node forwards its pods' traffic.
    run(&what, nsenter(holder, false, "sh").args(["-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"]))?;
    Ok(())
}

/// The IPv4 nameservers of a `resolv.conf` a node cannot reach: all but loopback ones, which
/// are the node's own loopback there and refuse at once anyway.
fn unreachable_nameservers(resolv_conf: &str) -> Vec<Ipv4Addr> {
    let mut nameservers: Vec<Ipv4Addr> = Vec::new();
    let listed = resolv_conf.lines().filter_map(|line| line.trim().strip_prefix("nameserver"));
    for ip in listed.filter_map(|rest| rest.trim().parse::<Ipv4Addr>().ok()) {
        // One route each: `ip route add` refuses a second.
        if !ip.is_loopback() && !nameservers.contains(&ip) {
            nameservers.push(ip);
        }
    }
    nameservers
}

/// The node's private `/run`, `/var/lib`, `/var/log` and masked sysctls; `/` shared within the node
/// (containerd and kubelet expect mount propagation between them).
fn mount_node(dir: &Path, holder: i32, system_uuid: &str) -> Result<()> {
    let what = "mounting the node's filesystems";
    let mount = |args: &[&str]| run(what, nsenter(holder, true, "mount").args(args));
    mount(&["--make-rshared", "/"])?;
    mount(&["-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run"])?;
    for (from, to) in [("var-lib", "/var/lib"), ("var-log", "/var/log")] {
        mount(&["--bind", &dir.join(from).display().to_string(), to])?;
    }
    for sysctl in MASKED_SYSCTLS {
        let source = Path::new("/proc/sys").join(sysctl);
        let Ok(value) = fs::read_to_string(&source) else { continue };
        let file = dir.join("sysctl").join(sysctl.replace('/', "."));
        fs::write(&file, value).map_err(io_err("writing", &file))?;
        mount(&["--bind", &file.display().to_string(), &source.display().to_string()])?;
    }
    // Every node its own machine: kubelet reads its systemUUID from the DMI product UUID, the one
    // file of /sys/class this layer adds (read-only, over the host's: sysfs has no directory to
    // create it in, and without DMI the file is missing).
    let dmi = dir.join("sys-class").join("dmi").join("id");
    fs::create_dir_all(&dmi).map_err(io_err("creating", &dmi))?;
    let product_uuid = dmi.join("product_uuid");
    fs::write(&product_uuid, format!("{}\n", smbios_uuid(system_uuid))).map_err(io_err("writing", &product_uuid))?;
    let lower = format!("lowerdir={}:/sys/class", dir.join("sys-class").display());
    mount(&["-t", "overlay", "overlay", "-o", &lower, "/sys/class"])?;
    Ok(())
}

/// The BIOS UUID of node `node` of cluster `cluster`: its VM's UUID with `cloud: vcsim`, a stable
/// random-looking RFC 4122 version 4 UUID in lower case (vSphere's form).
pub fn system_uuid(cluster: &str, node: &str) -> String {
    use sha2::Digest;
    let mut bytes: [u8; 16] = sha2::Sha256::digest(format!("{cluster}/{node}"))[..16].try_into().expect("16 bytes");
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// How Linux on a vSphere VM shows its BIOS UUID in `product_uuid`: the first three fields byte
/// swapped (SMBIOS stores them little-endian). The vSphere CCM swaps them back
/// (`ConvertK8sUUIDtoNormal`) before it looks the VM up.
pub fn smbios_uuid(uuid: &str) -> String {
    let swap = |field: &str| -> String {
        let bytes: Vec<&str> = (0..field.len()).step_by(2).map(|i| &field[i..i + 2]).collect();
        bytes.into_iter().rev().collect()
    };
    let fields: Vec<&str> = uuid.split('-').collect();
    match fields.as_slice() {
        [a, b, c, d, e] => format!("{}-{}-{}-{d}-{e}", swap(a), swap(b), swap(c)),
        _ => uuid.to_owned(),
    }
}

/// Makes `path` in every hierarchy (cpuset's with the parent's CPUs and memory nodes). On cgroup v2
/// a cgroup has only the controllers its parent enables in `cgroup.subtree_control`, and kubelet
/// checks its `cgroupRoot` has those it needs: each parent made here enables them (the host's
/// root is only checked, by [`missing_kernel_feature`]).
fn make_cgroups(path: &str) -> Result<()> {
    for hierarchy in cgroup_hierarchies() {
        let mut current = hierarchy.clone();
        for part in path.trim_start_matches('/').split('/') {
            let parent = current.clone();
            current = current.join(part);
            if parent != hierarchy {
                enable_kubelet_controllers(&parent)?;
            }
            if !current.exists() {
                fs::create_dir(&current).map_err(io_err("creating cgroup", &current))?;
            }
            for file in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(value) = fs::read_to_string(parent.join(file))
                    && !value.trim().is_empty()
                    && fs::read_to_string(current.join(file)).is_ok_and(|v| v.trim().is_empty())
                {
                    fs::write(current.join(file), value.trim()).map_err(io_err("writing", &current.join(file)))?;
                }
            }
        }
    }
    Ok(())
}

/// The controllers kubelet wants in its `cgroupRoot` on cgroup v2, of those the root offers
/// (kubelet's `getSupportedUnifiedControllers`).
const KUBELET_CONTROLLERS: &[&str] = &["cpu", "cpuset", "memory", "hugetlb", "pids"];

/// Of [`KUBELET_CONTROLLERS`], those the cgroup v2 `dir` offers (its `cgroup.controllers`) but
/// does not pass to its children (its `cgroup.subtree_control`); none on a v1 hierarchy or a
/// hybrid host's `unified` mount, whose controllers are all v1's.
fn undelegated_kubelet_controllers(dir: &Path) -> Vec<&'static str> {
    let read = |file: &str| fs::read_to_string(dir.join(file)).unwrap_or_default();
    let (offered, enabled) = (read("cgroup.controllers"), read("cgroup.subtree_control"));
    let listed = |list: &str, c: &str| list.split_whitespace().any(|l| l == c);
    KUBELET_CONTROLLERS.iter().copied().filter(|c| listed(&offered, c) && !listed(&enabled, c)).collect()
}

/// `+cpu +pids`: what enables `controllers` when written to a `cgroup.subtree_control`.
fn enabling(controllers: &[&str]) -> String {
    controllers.iter().map(|c| format!("+{c}")).collect::<Vec<_>>().join(" ")
}

/// Enables in the cgroup v2 `dir`'s children what kubelet wants of what `dir` offers.
fn enable_kubelet_controllers(dir: &Path) -> Result<()> {
    let missing = undelegated_kubelet_controllers(dir);
    if missing.is_empty() {
        return Ok(());
    }
    let subtree = dir.join("cgroup.subtree_control");
    fs::write(&subtree, enabling(&missing)).map_err(io_err("enabling cgroup controllers in", &subtree))
}

fn write_containerd_config(dir: &Path, socket: &Path, spec: &NodeSpec) -> Result<PathBuf> {
    let pause = spec.images.iter().find(|i| i.id == "Pause").map(|i| i.reference.as_str()).unwrap_or_default();
    let text = format!(
        r#"version = 3
root = "{root}"
state = "/run/containerd"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "{pause}"

[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = "{certs}"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  enable_selinux = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "{cni}"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "/usr/sbin/runc"
  SystemdCgroup = false
"#,
        root = dir.join("var-lib/containerd").display(),
        socket = socket.display(),
        cni = dir.join("cni").display(),
        certs = write_registry_hosts(dir, spec.hub_ports)?.display(),
    );
    let path = dir.join("containerd.toml");
    fs::write(&path, text).map_err(io_err("writing", &path))?;
    Ok(path)
}

/// containerd's registry hosts (`config_path`): the cluster's registry in the hub is the mirror
/// of registry.k8s.io, over plain HTTP, so pulls (`imagePullPolicy: Always`) get the images built
/// here. The hub has no route out: what the mirror lacks fails, as it would offline. A host's
/// service forwarded into the hub is a registry by its own name, `10.250.0.1:<port>`, over plain
/// HTTP: an image pushed there (`harness image push --plain-http`) is pulled by that name.
fn write_registry_hosts(dir: &Path, hub_ports: &[u16]) -> Result<PathBuf> {
    let certs = dir.join("certs.d");
    let mut hosts = vec![(
        super::images::oci::MIRRORED_REGISTRY.to_string(),
        format!("server = \"https://{}\"\n", super::images::oci::MIRRORED_REGISTRY),
        registry_url(),
    )];
    for port in hub_ports {
        let url = format!("http://{HUB_IP}:{port}");
        hosts.push((format!("{HUB_IP}:{port}"), format!("server = \"{url}\"\n"), url));
    }
    for (host, server, url) in hosts {
        let host_dir = certs.join(host);
        fs::create_dir_all(&host_dir).map_err(io_err("creating", &host_dir))?;
        let text = format!("{server}\n[host.\"{url}\"]\n  capabilities = [\"pull\", \"resolve\"]\n");
        let path = host_dir.join("hosts.toml");
        fs::write(&path, text).map_err(io_err("writing", &path))?;
    }
    Ok(certs)
}

/// The port of the cluster's registry on the hub's address.
pub const REGISTRY_PORT: u16 = 5000;

/// The cluster's registry, as nodes and pods reach it.
pub fn registry_url() -> String {
    format!("http://{HUB_IP}:{REGISTRY_PORT}")
}

/// The registry indexes at `indexes` as one, each blob's archive named by its absolute path.
fn merged_index(indexes: &[PathBuf]) -> Result<RegistryIndex> {
    let mut merged = RegistryIndex::default();
    for index in indexes {
        let text = fs::read(index).map_err(io_err("reading", index))?;
        let read: RegistryIndex = serde_json::from_slice(&text)
            .map_err(|e| ClusterError::RealNodes(format!("{} does not parse: {e}", index.display())))?;
        let images_dir = index.parent().unwrap_or(Path::new("/"));
        for (digest, mut blob) in read.blobs {
            blob.file = images_dir.join(&blob.file).display().to_string();
            merged.blobs.entry(digest).or_insert(blob);
        }
        for (repository, tags) in read.repositories {
            merged.repositories.entry(repository).or_default().extend(tags);
        }
    }
    Ok(merged)
}

/// Starts the registry (`tools/kube/registry`) in the hub, serving the images of every index of
/// `indexes`, and waits until it answers.
pub(super) fn start_registry(
    toolchain: &Toolchain,
    hub: i32,
    indexes: &[PathBuf],
    cluster: &mut LocalCluster,
) -> Result<()> {
    // One index in the cluster's dir, naming the archives by absolute path: the command line then
    // names the state dir, as every process of the cluster's does (the sweep after a SIGKILL finds it).
    let merged = merged_index(indexes)?;
    let own = real_dir(&cluster.dir).join("registry.json");
    fs::write(&own, serde_json::to_vec(&merged).expect("serialises")).map_err(io_err("writing", &own))?;
    let args = vec![
        format!("--net=/proc/{hub}/ns/net"),
        "--".into(),
        toolchain.binary("registry").display().to_string(),
        format!("-index={}", own.display()),
        format!("-listen={HUB_IP}:{REGISTRY_PORT}"),
    ];
    cluster.start(Path::new("/usr/bin/nsenter"), "registry", args)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = format!("{}/healthz", registry_url());
    loop {
        // The toolchain's wget, from inside the hub: the root namespace cannot reach it.
        let probe = nsenter(hub, false, &toolchain.binary("wget").display().to_string())
            .args(["-q", "-T", "1", "-O", "/dev/null", &url])
            .output();
        if probe.is_ok_and(|o| o.status.success()) {
            return Ok(());
        }
        super::check_alive(&cluster.state)?;
        if Instant::now() > deadline {
            return Err(ClusterError::RealNodes(format!("the registry did not answer {url} in 10 s")));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_for_socket(socket: &Path, state: &ClusterState) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        super::check_alive(state)?;
        if Instant::now() > deadline {
            return Err(ClusterError::RealNodes(format!("containerd did not open {} in 30 s", socket.display())));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// `ctr images import` of every image archive into the node's containerd (namespace `k8s.io`, the
/// CRI's), labelled pinned so that kubelet's image garbage collection keeps them. Most of a node's
/// start: nodes import at once, each on its own thread.
pub(super) fn import_images(spec: &NodeSpec, cluster_dir: &Path) -> Result<()> {
    let socket = containerd_socket(cluster_dir, spec.index);
    for image in spec.images {
        let mut command = Command::new(spec.toolchain.binary("ctr"));
        command
            .arg(format!("--address={}", socket.display()))
            .args(["--namespace=k8s.io", "images", "import", "--label=io.cri-containerd.pinned=pinned"])
            .arg(&image.archive);
        run(&format!("importing {} into node {}", image.reference, spec.name), &mut command)?;
    }
    Ok(())
}

fn write_kubelet_config(dir: &Path, spec: &NodeSpec, cluster_dir: &Path) -> Result<PathBuf> {
    let mut config = serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node_cgroup(cluster_dir, &spec.name),
        "containerRuntimeEndpoint": format!("unix://{}", containerd_socket(cluster_dir, spec.index).display()),
        "failSwapOn": false,
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true},
            "x509": {"clientCAFile": spec.ca_cert},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDomain": "cluster.local",
        "clusterDNS": [super::dns::DNS_IP],
        "healthzBindAddress": "127.0.0.1",
        "readOnlyPort": 0,
        "serializeImagePulls": false,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "resolvConf": "/etc/resolv.conf",
        "protectKernelDefaults": false,
        // Renewed every quarter of it, 5 s: four renewals within kube-controller-manager's
        // 20 s grace period, slack for a loaded machine.
        "nodeLeaseDurationSeconds": 20,
    });
    if !cgroup_v2() {
        config["failCgroupV1"] = serde_json::json!(false);
    }
    let path = dir.join("kubelet.yaml");
    fs::write(&path, serde_json::to_vec_pretty(&config).expect("serialises")).map_err(io_err("writing", &path))?;
    Ok(path)
}

fn write_node_kubeconfig(dir: &Path, spec: &NodeSpec) -> Result<PathBuf> {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": format!("https://{HUB_IP}:{}", spec.api_port),
            "certificate-authority": spec.ca_cert,
        }}],
        "users": [{"name": spec.name, "user": {"client-certificate": spec.client_cert, "client-key": spec.client_key}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": spec.name}}],
        "current-context": "local",
    });
    let path = dir.join("kubeconfig");
    fs::write(&path, serde_json::to_vec_pretty(&config).expect("serialises")).map_err(io_err("writing", &path))?;
    Ok(path)
}

/// Waits until every node has registered and got its pod CIDR, then gives each its CNI
/// configuration. Routes between the pod CIDRs are not set here: the CCM's route controller
/// creates them in the local cloud and its data plane ([`start_data_plane`]) programs them.
pub async fn configure_pod_network(
    client: &kube::Client,
    state: &ClusterState,
    holders: &[(String, i32)],
    dir: &Path,
) -> Result<Vec<(String, String)>> {
    let api: Api<Node> = Api::all(client.clone());
    let started = Instant::now();
    let cidrs: Vec<(String, String)> = loop {
        super::check_alive(state)?;
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|source| ClusterError::Kube { cluster: state.name.clone(), source })?;
        let found: Vec<(String, String)> = holders
            .iter()
            .filter_map(|(name, _)| {
                let node = list.items.iter().find(|n| n.metadata.name.as_deref() == Some(name))?;
                Some((name.clone(), node.spec.as_ref()?.pod_cidr.clone()?))
            })
            .collect();
        if found.len() == holders.len() {
            break found;
        }
        if started.elapsed() > Duration::from_secs(90) {
            return Err(ClusterError::Timeout {
                what: format!("{} kubelets to register and get pod CIDRs ({} have)", holders.len(), found.len()),
                waited: started.elapsed(),
                logs: dir.join("logs"),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    for (name, cidr) in &cidrs {
        write_cni_config(&node_dir(dir, name), cidr)?;
    }
    Ok(cidrs)
}

/// Routes every node's pod CIDR to the node, in the hub and in every other node, as a host-gateway
/// CNI does: for a cloud with no routes of its own (vSphere without NSX-T), so pods on different
/// nodes reach each other. `cidrs` are the pod CIDRs by node, in `holders` order.
pub fn route_pod_cidrs(hub: i32, holders: &[(String, i32)], cidrs: &[(String, String)]) -> Result<()> {
    let via = |name: &str| holders.iter().position(|(n, _)| n == name).map(|index| node_ip(index as u32));
    let namespaces = std::iter::once((None, hub)).chain(holders.iter().map(|(name, pid)| (Some(name.as_str()), *pid)));
    for (own, pid) in namespaces {
        for (node, cidr) in cidrs.iter().filter(|(node, _)| Some(node.as_str()) != own) {
            let Some(gateway) = via(node) else { continue };
            let what = format!("routing pod CIDR {cidr} to node {node}");
            run(&what, nsenter(pid, false, "ip").args(["route", "replace", cidr, "via", &gateway.to_string()]))?;
        }
    }
    Ok(())
}

/// Starts the local cloud's data plane inside the hub (`nsenter --net`): it programs the cloud's
/// load balancers (ingress IPs from [`LB_POOL`]) into the hub and its routes into the hub and
/// every node of `holders` (node name, PID holding its namespaces).
pub(super) fn start_data_plane(
    ccm_binary: &Path,
    hub: i32,
    holders: &[(String, i32)],
    cluster: &mut LocalCluster,
) -> Result<()> {
    let mut args = vec![
        format!("--net=/proc/{hub}/ns/net"),
        "--".into(),
        ccm_binary.display().to_string(),
        "local-cloud".into(),
        format!("--state-dir={}", cluster.dir.join("cloud").display()),
        "data-plane".into(),
        format!("--cluster={}", cluster.state.name),
        format!("--ingress-pool={LB_POOL}"),
        format!("--cluster-cidr={CLUSTER_CIDR}"),
    ];
    args.extend(holders.iter().map(|(name, holder)| format!("--node={name}=/proc/{holder}/ns/net")));
    cluster.start(Path::new("/usr/bin/nsenter"), "data-plane", args)
}

/// The node's CNI configuration: a bridge with host-local addresses from its pod CIDR (state in the
/// node's own `/var/lib`), port mappings.
fn write_cni_config(node_dir: &Path, pod_cidr: &str) -> Result<()> {
    let config = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "harness",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": node_dir.join("var-lib/cni/networks"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    });
    let path = node_dir.join("cni").join("10-harness.conflist");
    let partial = path.with_extension("partial");
    fs::write(&partial, serde_json::to_vec_pretty(&config).expect("serialises"))
        .map_err(io_err("writing", &partial))?;
    fs::rename(&partial, &path).map_err(io_err("writing", &path))
}

/// Whether `state`'s node `node` is a real one (it has namespaces of its own).
pub fn is_real_node(state: &ClusterState, node: &str) -> bool {
    let holder = format!("{node}-namespaces");
    state.processes.iter().chain(state.stopped.iter().map(|s| &s.record)).any(|p| p.component == holder)
}

/// Kills every pod of node `node` (index `index`) whose containerd and kubelet are already
/// stopped, as a machine going down takes them: the runc shims (they name the node's containerd
/// socket), whatever is left in the node's cgroups, and, while the node's namespaces are held by
/// `holder`, its pods' mounts and network namespaces and its `/run` (a fresh tmpfs, as after a
/// reboot). Bounded: at most about 10 s.
pub(super) fn kill_pods(cluster_dir: &Path, node: &str, index: u32, holder: Option<i32>) -> Result<()> {
    process::kill_expected(&containerd_socket(cluster_dir, index), &format!("node {node}'s runc shims"));
    let cgroup = node_cgroup(cluster_dir, node);
    let deadline = Instant::now() + Duration::from_secs(10);
    for hierarchy in cgroup_hierarchies() {
        let root = hierarchy.join(cgroup.trim_start_matches('/'));
        while kill_cgroup_tree(&root) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let Some(holder) = holder else { return Ok(()) };
    // Pod netns handles and volume mounts, deepest first, then /run itself.
    let script = "awk '{print $5}' /proc/self/mountinfo | grep -E '^/(run|var/lib/kubelet/pods)/' | sort -r \
         | xargs -r umount -l; umount -l /run && mount -t tmpfs -o mode=755 tmpfs /run";
    run(&format!("clearing the mounts of node {node}"), nsenter(holder, true, "sh").args(["-c", script]))?;
    Ok(())
}

/// SIGKILLs every process in the cgroup `dir` and below; returns how many there were.
fn kill_cgroup_tree(dir: &Path) -> usize {
    let mut killed = 0;
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
            killed += kill_cgroup_tree(&entry.path());
        }
    }
    let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        killed += 1;
    }
    killed
}

/// Node `index`'s containerd socket, for waiting until a restarted containerd serves.
pub(super) fn node_containerd_socket(cluster_dir: &Path, index: u32) -> PathBuf {
    containerd_socket(cluster_dir, index)
}

/// Each real node's `/var/log/pods` as the host sees it (kubelet's container logs,
/// `<namespace>_<pod>_<uid>/<container>/<restart>.log`), by node name.
pub fn pod_log_dirs(cluster_dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(real_dir(cluster_dir)) else { return Vec::new() };
    let mut dirs: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path().join("var-log/pods"))))
        .filter(|(_, pods)| pods.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// What a cluster with real nodes leaves once its processes are gone: processes still in its
/// cgroups (containers whose shim was killed), and the cgroups. Kills the first, removes the second.
pub fn cleanup(cluster_dir: &Path) {
    // The runc shims name containerd's socket (in the socket dir) in their command line.
    process::sweep(&socket_dir(cluster_dir));
    let _ = fs::remove_dir_all(socket_dir(cluster_dir));
    let prefix = cgroup_prefix(cluster_dir);
    for hierarchy in cgroup_hierarchies() {
        let root = hierarchy.join(&prefix);
        if root.exists() {
            remove_cgroup_tree(&root);
        }
    }
}

/// Leftovers of the cluster in `cluster_dir` on this machine, by kind (empty when clean): for
/// teardown tests and `down`'s own check.
pub fn leftovers(cluster_dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let marker = cluster_dir.display().to_string();
    for pid in process::find_by_marker(cluster_dir).into_iter().chain(process::find_by_marker(&socket_dir(cluster_dir)))
    {
        found.push(format!("process {pid}"));
    }
    if socket_dir(cluster_dir).exists() {
        found.push(format!("directory {}", socket_dir(cluster_dir).display()));
    }
    let prefix = cgroup_prefix(cluster_dir);
    for hierarchy in cgroup_hierarchies() {
        if hierarchy.join(&prefix).exists() {
            found.push(format!("cgroup {}", hierarchy.join(&prefix).display()));
        }
    }
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines().filter(|l| process::mentions(l, &marker)) {
        found.push(format!("mount {line}"));
    }
    found
}

/// The network and mount namespaces of a cluster's holder processes, by name (`net:[4026532..]`),
/// each held open: the kernel numbers namespaces with the lowest free number, so once one is freed
/// another cluster's new namespace gets its name at once. Held, none is freed, and a process found
/// in one by [`namespaces_in_use`] after `down` is really in the cluster's.
#[derive(Debug)]
pub struct Namespaces {
    pub names: Vec<String>,
    _held: Vec<fs::File>,
}

/// The namespaces the cluster's holder processes keep, for checking after `down` that none is used.
pub fn namespaces(state: &ClusterState) -> Namespaces {
    let (names, held) = state
        .processes
        .iter()
        .flat_map(|p| match p.component.as_str() {
            "hub" => vec![(p.pid, "net")],
            node if node.ends_with("-namespaces") => vec![(p.pid, "net"), (p.pid, "mnt")],
            _ => Vec::new(),
        })
        .filter_map(|(pid, kind)| {
            let path = format!("/proc/{pid}/ns/{kind}");
            let handle = fs::File::open(&path).ok()?;
            Some((fs::read_link(&path).ok()?.display().to_string(), handle))
        })
        .unzip();
    Namespaces { names, _held: held }
}

/// Which of `namespaces` (from [`namespaces`]) some process on the machine is still in.
pub fn namespaces_in_use(namespaces: &Namespaces) -> Vec<String> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    let mut used = std::collections::BTreeSet::new();
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
        for kind in ["net", "mnt"] {
            if let Ok(link) = fs::read_link(format!("/proc/{pid}/ns/{kind}")) {
                let link = link.display().to_string();
                if namespaces.names.contains(&link) {
                    used.insert(format!("{link} (pid {pid})"));
                }
            }
        }
    }
    used.into_iter().collect()
}

/// Why this kernel cannot run real nodes at all, if it cannot (a feature missing, not a package).
pub fn missing_kernel_feature() -> Option<String> {
    for (file, feature) in [("/proc/self/ns/net", "network namespaces"), ("/proc/self/ns/mnt", "mount namespaces")] {
        if !Path::new(file).exists() {
            return Some(format!("the kernel lacks {feature} ({file} is missing)"));
        }
    }
    let filesystems = fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !filesystems.lines().any(|l| l.trim_end().ends_with("overlay")) {
        return Some("the kernel lacks the overlay filesystem".into());
    }
    if cgroup_hierarchies().is_empty() {
        return Some(format!("no cgroup hierarchy is mounted under {CGROUP_FS}"));
    }
    if cgroup_v2() {
        return undelegated_controllers(Path::new(CGROUP_FS));
    }
    None
}

/// Why the cgroup v2 `root` cannot hold kubelets: it offers controllers kubelet needs but does not
/// pass them to its children (enabling them there would change the host's own cgroups).
fn undelegated_controllers(root: &Path) -> Option<String> {
    let missing = undelegated_kubelet_controllers(root);
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "cgroup v2: the root cgroup does not pass {} to its children, and kubelet needs them in its cgroupRoot: \
         enable them (echo '{}' > {}) and re-run",
        missing.join(", "),
        enabling(&missing),
        root.join("cgroup.subtree_control").display()
    ))
}

fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&entry.path());
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut killed = std::collections::BTreeSet::new();
    loop {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            // Each node's pods were stopped after its containerd: whatever is still here was missed.
            if killed.insert(pid) {
                tracing::warn!("stopping stray process {} in cgroup {}", process::describe(pid), dir.display());
            }
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) if Instant::now() > deadline => {
                tracing::warn!("could not remove cgroup {}: {e}", dir.display());
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The instances of the local cloud for real nodes: the node's hub address.
pub fn instance_addresses(index: u32) -> Vec<String> {
    vec![node_ip(index).to_string()]
}

/// Whether `node` is one of the nodes kubelets of this module registered (not a kwok node).
pub fn is_real(node: &Node) -> bool {
    node.metadata.annotations.as_ref().is_none_or(|a| !a.contains_key("kwok.x-k8s.io/node")) && nodes::is_ready(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory laid out as a cgroup v2 one (plain files: a write replaces where cgroupfs adds).
    fn fake_v2_cgroup(controllers: &str, subtree_control: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("cgroup.controllers"), controllers).unwrap();
        fs::write(dir.path().join("cgroup.subtree_control"), subtree_control).unwrap();
        dir
    }

    #[test]
    fn the_registry_serves_every_index_each_blob_by_its_archives_absolute_path() {
        let tmp = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (dir, reference, content) in [
            ("node-images", "registry.k8s.io/e2e-test-images/busybox:1.37.0-2", b"busybox".as_slice()),
            ("conformance", "registry.k8s.io/conformance:v1.37.1", b"e2e.test".as_slice()),
        ] {
            let dir = tmp.path().join(dir);
            fs::create_dir_all(&dir).unwrap();
            let shared = super::super::images::oci::files_layer(&[("bin/sh", b"shared base", 0o755)]).unwrap();
            let own = super::super::images::oci::files_layer(&[("file", content, 0o644)]).unwrap();
            let archive = dir.join("image.oci.tar");
            let config = serde_json::json!({});
            super::super::images::write_archive(&archive, reference, &[&shared, &own], config).unwrap();
            let mut index = RegistryIndex::default();
            index.add_archive(&archive).unwrap();
            fs::write(dir.join("registry.json"), serde_json::to_vec(&index).unwrap()).unwrap();
            paths.push(dir.join("registry.json"));
        }
        let merged = merged_index(&paths).unwrap();
        let repositories: Vec<&str> = merged.repositories.keys().map(String::as_str).collect();
        assert_eq!(repositories, ["conformance", "e2e-test-images/busybox"]);
        assert_eq!(merged.repositories["conformance"].keys().collect::<Vec<_>>(), ["v1.37.1"]);
        // The layer both share is served from the first index's archive; every blob by absolute path.
        let first = tmp.path().join("node-images/image.oci.tar").display().to_string();
        let second = tmp.path().join("conformance/image.oci.tar").display().to_string();
        let shared = super::super::images::oci::digest(
            &super::super::images::oci::files_layer(&[("bin/sh", b"shared base", 0o755)]).unwrap(),
        );
        assert_eq!(merged.blobs[&shared].file, first);
        assert!(merged.blobs.values().all(|b| b.file == first || b.file == second), "{merged:?}");
        assert!(merged.blobs.values().any(|b| b.file == second), "the conformance image's own blobs");

        let broken = tmp.path().join("broken.json");
        fs::write(&broken, "{").unwrap();
        let err = merged_index(std::slice::from_ref(&broken)).unwrap_err().to_string();
        assert!(err.contains(&broken.display().to_string()) && err.contains("does not parse"), "{err}");
    }

    #[test]
    fn the_machines_nameservers_but_loopback_are_refused_in_nodes() {
        let resolv_conf = "# generated\nnameserver 10.255.255.53\nnameserver 127.0.0.53\nnameserver fd00::1\n\
                           search example.org\n  nameserver   192.0.2.1  \nnameserver 10.255.255.53\n";
        assert_eq!(
            unreachable_nameservers(resolv_conf),
            [Ipv4Addr::new(10, 255, 255, 53), Ipv4Addr::new(192, 0, 2, 1)]
        );
        assert_eq!(unreachable_nameservers(""), Vec::<Ipv4Addr>::new());
    }

    #[test]
    fn a_v2_parent_enables_what_kubelet_needs_of_what_it_offers() {
        let dir = fake_v2_cgroup("cpuset cpu io memory pids rdma misc\n", "cpu memory\n");
        enable_kubelet_controllers(dir.path()).unwrap();
        // hugetlb is not offered, io is not kubelet's: neither is asked for.
        let written = fs::read_to_string(dir.path().join("cgroup.subtree_control")).unwrap();
        assert_eq!(written, "+cpuset +pids");
    }

    #[test]
    fn a_v2_parent_that_passes_everything_down_is_left_alone() {
        let dir = fake_v2_cgroup("cpuset cpu memory hugetlb pids\n", "cpuset cpu memory hugetlb pids\n");
        enable_kubelet_controllers(dir.path()).unwrap();
        let kept = fs::read_to_string(dir.path().join("cgroup.subtree_control")).unwrap();
        assert_eq!(kept, "cpuset cpu memory hugetlb pids\n", "nothing is written when nothing is missing");
        // A hybrid host's `unified` mount offers nothing (its controllers are v1's): nothing to write.
        let unified = fake_v2_cgroup("", "");
        enable_kubelet_controllers(unified.path()).unwrap();
        assert_eq!(fs::read_to_string(unified.path().join("cgroup.subtree_control")).unwrap(), "");
    }

    #[test]
    fn a_v2_root_that_keeps_controllers_to_itself_is_named_with_the_fix() {
        let root = fake_v2_cgroup("cpuset cpu io memory hugetlb pids\n", "cpu io memory pids\n");
        let problem = undelegated_controllers(root.path()).expect("cpuset and hugetlb are not passed down");
        assert!(problem.contains("cpuset, hugetlb"), "{problem}");
        assert!(problem.contains("echo '+cpuset +hugetlb' >"), "{problem}");
        assert!(problem.contains("cgroup.subtree_control"), "{problem}");
        let delegating = fake_v2_cgroup("cpuset cpu io memory hugetlb pids\n", "cpuset cpu io memory hugetlb pids\n");
        assert_eq!(undelegated_controllers(delegating.path()), None);
    }

    #[test]
    fn cgroup_prefixes_differ_per_state_dir_and_are_stable() {
        let a = cgroup_prefix(Path::new("/s/clusters/a"));
        assert_eq!(a, cgroup_prefix(Path::new("/s/clusters/a")));
        assert_ne!(a, cgroup_prefix(Path::new("/t/clusters/a")));
        assert!(a.starts_with("harness-") && a.len() == 20, "{a}");
    }

    #[test]
    fn system_uuids_are_distinct_stable_lower_case_version_4_and_shown_byte_swapped() {
        let a = system_uuid("harness", "harness-node-0");
        assert_eq!(a, system_uuid("harness", "harness-node-0"));
        assert_ne!(a, system_uuid("harness", "harness-node-1"));
        assert_ne!(a, system_uuid("other", "harness-node-0"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4", "{a}");
        assert!(a.chars().all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)), "{a}");
        // As `ConvertK8sUUIDtoNormal` of cloud-provider-vsphere reads a kubelet's systemUUID.
        assert_eq!(smbios_uuid("4229a1b2-c3d4-4e5f-8a6b-0c1d2e3f4a5b"), "b2a12942-d4c3-5f4e-8a6b-0c1d2e3f4a5b");
        assert_eq!(smbios_uuid(&smbios_uuid(&a)), a);
    }

    #[test]
    fn hub_ports_the_hub_cannot_listen_on_are_refused_naming_the_port() {
        assert!(check_hub_ports(&[4443, 5001], Some(6443)).is_ok());
        let refused = [
            (&[0][..], None, 0),
            (&[4443, 4443][..], None, 4443),
            (&[6443][..], Some(6443), 6443),
            (&[5000][..], None, 5000),
        ];
        for (ports, api, port) in refused {
            let error = check_hub_ports(ports, api).unwrap_err().to_string();
            assert!(error.contains(&format!("--hub-port {port} ")), "{error}");
        }
    }

    #[test]
    fn each_forwarded_host_port_is_a_plain_http_registry_and_registry_k8s_io_is_mirrored() {
        let dir = tempfile::tempdir().unwrap();
        let certs = write_registry_hosts(dir.path(), &[5001]).unwrap();
        let mirror = fs::read_to_string(certs.join("registry.k8s.io/hosts.toml")).unwrap();
        assert!(mirror.starts_with("server = \"https://registry.k8s.io\""), "{mirror}");
        assert!(mirror.contains(&format!("[host.\"{}\"]", registry_url())), "{mirror}");
        let forwarded = fs::read_to_string(certs.join(format!("{HUB_IP}:5001/hosts.toml"))).unwrap();
        assert!(forwarded.starts_with(&format!("server = \"http://{HUB_IP}:5001\"")), "{forwarded}");
        assert!(forwarded.contains("capabilities = [\"pull\", \"resolve\"]"), "{forwarded}");
    }

    #[test]
    fn the_hub_forwards_the_api_server_and_each_host_port_through_a_socket_of_its_own() {
        let forwards = hub_forwards(Path::new("/s"), 6443, &[4443, 5000]);
        let ports: Vec<u16> = forwards.iter().map(|(port, _)| *port).collect();
        assert_eq!(ports, [6443, 4443, 5000]);
        let sockets: std::collections::BTreeSet<_> = forwards.iter().map(|(_, socket)| socket.clone()).collect();
        assert_eq!(sockets.len(), 3, "{forwards:?}");
        assert_eq!(forwards[0].1, Path::new("/s/apiserver.sock"), "kube-apiserver's socket keeps its name");
    }

    #[test]
    fn node_addresses_are_on_the_hub_network_and_distinct() {
        let ips: std::collections::HashSet<_> = (0..MAX_NODES).map(node_ip).collect();
        assert_eq!(ips.len(), MAX_NODES as usize);
        assert!(!ips.contains(&HUB_IP));
        assert_eq!(node_ip(MAX_NODES - 1), Ipv4Addr::new(10, 250, 0, 209));
    }

    #[test]
    fn preflight_refuses_more_nodes_than_the_hub_network_holds() {
        let err = preflight(MAX_NODES + 1, false).unwrap_err().to_string();
        assert!(err.contains(&format!("at most {MAX_NODES} real nodes")), "{err}");
    }
}
