//! Reaching a load balancer's ingress IP of a cluster with real nodes from outside the cluster, as
//! a client on the cloud's network would: `harness cluster lb-probe`.
//!
//! The test runner lives in the root network namespace, where nothing may be added. So each probe
//! makes a *client* network namespace (held by `unshare --net tail -f <socket dir>/...`, so `down`
//! sweeps a probe a SIGKILL left), wires it to the hub's bridge with a veth pair at a client
//! address ([`DEFAULT_SOURCE`] unless told), routes everything through the hub, and dials from
//! inside it by running `harness cluster lb-dial` there. The namespace, its veth pair and any
//! conntrack state go when the holder ends. Probes of one cluster take turns (a lock file in the
//! socket dir): two clients must not hold one address at once.
//!
//! `harness cluster exec` runs a whole program as such a client ([`Session`]): upstream's
//! load-balancer e2e dials ingress IPs, nodes and their health-check ports from its own process.
//! Inside the session's namespace a `netproxy` listens on `127.0.0.1:<kube-apiserver's port>` and
//! forwards to kube-apiserver's Unix socket, so the cluster's kubeconfig works there unchanged.
//! Sessions take addresses of their own ([`SESSION_SOURCES`], a lock file each), so several run at
//! once beside the probes.

use std::fs;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{ClusterError, Result, real};

/// The client address a probe dials from unless `--source` says otherwise.
pub const DEFAULT_SOURCE: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 250);
/// Client addresses: the top of the hub network, above the nodes' (`.10`–`.209`).
const SOURCES: std::ops::RangeInclusive<u8> = 210..=254;
/// The addresses [`Session`]s take, one each at a time (probes default to `.250`).
pub const SESSION_SOURCES: std::ops::RangeInclusive<u8> = 230..=249;

/// What to dial, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dial {
    /// The ingress address, IPv4 or IPv6.
    pub ip: IpAddr,
    pub port: u16,
    pub udp: bool,
    /// Sent once connected (TCP: then the write side is closed); UDP needs it.
    pub send: Option<String>,
    pub timeout: Duration,
}

impl Dial {
    fn describe(&self) -> String {
        format!("{}:{}/{}", self.ip, self.port, if self.udp { "UDP" } else { "TCP" })
    }

    /// The `lb-dial` arguments that repeat this dial.
    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "cluster".into(),
            "lb-dial".into(),
            format!("--ip={}", self.ip),
            format!("--port={}", self.port),
            format!("--timeout={}ms", self.timeout.as_millis()),
        ];
        if self.udp {
            args.push("--udp".into());
        }
        if let Some(send) = &self.send {
            args.push(format!("--send={send}"));
        }
        args
    }
}

/// Dials from wherever this process is and returns what came back (for TCP without `send`:
/// `connected`), or why nothing did.
pub fn dial(dial: &Dial) -> std::result::Result<String, String> {
    let target = SocketAddr::from((dial.ip, dial.port));
    let what = dial.describe();
    if dial.udp {
        let Some(send) = &dial.send else {
            return Err("a UDP probe needs --send TEXT: it only learns something from a reply".into());
        };
        let any: IpAddr = if dial.ip.is_ipv6() { Ipv6Addr::UNSPECIFIED.into() } else { Ipv4Addr::UNSPECIFIED.into() };
        let socket = UdpSocket::bind((any, 0)).map_err(|e| format!("UDP socket: {e}"))?;
        socket.connect(target).map_err(|e| format!("{what}: {e}"))?;
        socket.set_read_timeout(Some(dial.timeout)).map_err(|e| format!("{what}: {e}"))?;
        socket.send(send.as_bytes()).map_err(|e| format!("{what}: sending: {e}"))?;
        let mut buffer = vec![0; 65536];
        let got = socket.recv(&mut buffer).map_err(|e| refused_or(&what, e, dial.timeout))?;
        return Ok(String::from_utf8_lossy(&buffer[..got]).into_owned());
    }
    let mut stream =
        TcpStream::connect_timeout(&target, dial.timeout).map_err(|e| refused_or(&what, e, dial.timeout))?;
    let Some(send) = &dial.send else { return Ok("connected".into()) };
    stream.set_read_timeout(Some(dial.timeout)).map_err(|e| format!("{what}: {e}"))?;
    stream.write_all(send.as_bytes()).map_err(|e| format!("{what}: sending: {e}"))?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| refused_or(&what, e, dial.timeout))?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

fn refused_or(what: &str, error: std::io::Error, timeout: Duration) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => format!("{what}: connection refused"),
        std::io::ErrorKind::ConnectionReset => format!("{what}: connection reset"),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            format!("{what}: no answer within {}", humantime::format_duration(timeout))
        }
        _ => format!("{what}: {error}"),
    }
}

/// Checks a `--source` address: on the hub network, above the nodes.
pub fn check_source(source: Ipv4Addr) -> Result<()> {
    let [a, b, c, d] = source.octets();
    let hub = real::HUB_IP.octets();
    if [a, b, c] == [hub[0], hub[1], hub[2]] && SOURCES.contains(&d) {
        return Ok(());
    }
    Err(ClusterError::RealNodes(format!(
        "--source {source}: a probe client's address is one of {}.{}.{}.{}-{} (the hub network above its nodes)",
        hub[0],
        hub[1],
        hub[2],
        SOURCES.start(),
        SOURCES.end()
    )))
}

/// Dials `dial` from a client namespace on the hub of cluster `name` at address `source`.
pub fn probe(name: &str, source: Ipv4Addr, dial: &Dial) -> Result<std::result::Result<String, String>> {
    check_source(source)?;
    let state = super::load_state(name)?;
    let hub = running_hub(&state, "lb-probe")?;
    let sockets = real::socket_dir(&super::cluster_dir(name));
    let lock_path = sockets.join("probe.lock");
    let lock = fs::File::create(&lock_path).map_err(super::io_err("creating", &lock_path))?;
    lock.lock().map_err(super::io_err("locking", &lock_path))?;
    let client = Client::start(&sockets, hub, source)?;
    let exe = std::env::current_exe().map_err(super::io_err("finding", Path::new("the harness binary")))?;
    let output = Command::new("nsenter")
        .arg(format!("--net=/proc/{}/ns/net", client.holder.id()))
        .arg("--")
        .arg(&exe)
        .args(dial.args())
        .output()
        .map_err(super::io_err("running", &exe))?;
    drop(client);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    match output.status.success() {
        true => Ok(Ok(stdout)),
        false => {
            let reason = stderr.lines().last().unwrap_or("the dial failed").trim_start_matches("error: ");
            Ok(Err(format!("from {source}: {reason}")))
        }
    }
}

/// The running hub of cluster `name`, for `what` (a command that needs real nodes).
fn running_hub(state: &super::ClusterState, what: &str) -> Result<i32> {
    let hub = state.processes.iter().find(|p| p.component == "hub").filter(|p| p.is_running());
    hub.map(|p| p.pid).ok_or_else(|| {
        ClusterError::RealNodes(format!(
            "cluster '{}' has no running hub namespace: {what} needs a cluster with --node-kind real",
            state.name
        ))
    })
}

/// A client on the hub's network that programs run in (`harness cluster exec`), with
/// kube-apiserver at its usual address; dropping it ends the proxy and the namespace.
pub struct Session {
    proxy: Child,
    client: Client,
    _address: fs::File,
}

impl Session {
    /// Opens a session on the hub of cluster `name`.
    pub fn open(name: &str) -> Result<Self> {
        let state = super::load_state(name)?;
        let hub = running_hub(&state, "cluster exec")?;
        let api_port = api_port(&state.api_server)?;
        let netproxy = netproxy_binary(&state)?;
        let sockets = real::socket_dir(&super::cluster_dir(name));
        let (source, address) = take_address(&sockets)?;
        let client = Client::start(&sockets, hub, source)?;
        let api_socket = sockets.join("apiserver.sock");
        let mut proxy = Command::new("nsenter")
            .arg(format!("--net=/proc/{}/ns/net", client.holder.id()))
            .arg("--")
            .arg(&netproxy)
            .arg(format!("-forward=tcp:127.0.0.1:{api_port}={}", unix_target(&api_socket)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(super::io_err("starting", &netproxy))?;
        if let Err(e) = wait_listening(&mut proxy, api_port) {
            let _ = proxy.kill();
            let _ = proxy.wait();
            return Err(e);
        }
        Ok(Session { proxy, client, _address: address })
    }

    /// The session's network namespace, for `nsenter --net=`.
    pub fn netns(&self) -> std::path::PathBuf {
        format!("/proc/{}/ns/net", self.client.holder.id()).into()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.proxy.kill();
        let _ = self.proxy.wait();
    }
}

fn unix_target(path: &Path) -> String {
    format!("unix:{}", path.display())
}

/// The port of `https://127.0.0.1:<port>`.
fn api_port(api_server: &str) -> Result<u16> {
    let port = api_server.rsplit_once(':').and_then(|(_, port)| port.trim_end_matches('/').parse().ok());
    port.ok_or_else(|| ClusterError::RealNodes(format!("the cluster's API server {api_server:?} names no port")))
}

/// The `netproxy` the cluster's hub runs (the toolchain's of its release).
fn netproxy_binary(state: &super::ClusterState) -> Result<std::path::PathBuf> {
    let root = state.processes.iter().find(|p| p.component == "netproxy-root").filter(|p| p.is_running());
    let root = root.ok_or_else(|| {
        ClusterError::RealNodes(format!("cluster '{}' has no running netproxy-root: is it up?", state.name))
    })?;
    let exe = Path::new("/proc").join(root.pid.to_string()).join("exe");
    fs::read_link(&exe).map_err(super::io_err("reading", &exe))
}

/// The first of [`SESSION_SOURCES`] no other session holds, and the lock that holds it.
fn take_address(sockets: &Path) -> Result<(Ipv4Addr, fs::File)> {
    let hub = real::HUB_IP.octets();
    for last in SESSION_SOURCES {
        let path = sockets.join(format!("session-{last}.lock"));
        let file = fs::File::create(&path).map_err(super::io_err("creating", &path))?;
        if file.try_lock().is_ok() {
            return Ok((Ipv4Addr::new(hub[0], hub[1], hub[2], last), file));
        }
    }
    Err(ClusterError::RealNodes(format!(
        "every client address of the hub ({}.{}.{}.{}-{}) is taken by another `cluster exec`: wait for one to end",
        hub[0],
        hub[1],
        hub[2],
        SESSION_SOURCES.start(),
        SESSION_SOURCES.end()
    )))
}

/// Waits until `proxy` listens on `127.0.0.1:port` in its namespace (its `/proc/<pid>/net/tcp`
/// lists the sockets of that namespace).
fn wait_listening(proxy: &mut Child, port: u16) -> Result<()> {
    let table = format!("/proc/{}/net/tcp", proxy.id());
    let wanted = format!("0100007F:{port:04X}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = proxy.try_wait() {
            return Err(ClusterError::RealNodes(format!("the session's netproxy ended at once: {status}")));
        }
        let listening = fs::read_to_string(&table).unwrap_or_default().lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(1) == Some(&wanted.as_str()) && fields.get(3) == Some(&"0A")
        });
        if listening {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(ClusterError::RealNodes(format!("the session's netproxy did not listen on 127.0.0.1:{port} within 10s")))
}

/// A client namespace wired to the hub; dropping it removes the veth pair and ends the namespace.
struct Client {
    holder: Child,
    hub: i32,
    link: String,
    source: Ipv4Addr,
    marker: std::path::PathBuf,
}

impl Client {
    fn start(sockets: &Path, hub: i32, source: Ipv4Addr) -> Result<Self> {
        let marker = sockets.join(format!("probe-{}.holder", std::process::id()));
        fs::write(&marker, "").map_err(super::io_err("writing", &marker))?;
        let holder = Command::new("unshare")
            .args(["--net", "--", "tail", "-f"])
            .arg(&marker)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(super::io_err("starting", Path::new("unshare")))?;
        let link = format!("lbp{}", std::process::id() % 1_000_000);
        let client = Client { holder, hub, link, source, marker };
        client.wait_for_namespace()?;
        client.wire()?;
        Ok(client)
    }

    fn wait_for_namespace(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mine = fs::read_link("/proc/self/ns/net").ok();
        while Instant::now() < deadline {
            let theirs = fs::read_link(format!("/proc/{}/ns/net", self.holder.id())).ok();
            if theirs.is_some() && theirs != mine {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(ClusterError::RealNodes("the probe's client namespace did not come up within 5s".into()))
    }

    fn wire(&self) -> Result<()> {
        let pid = self.holder.id().to_string();
        let in_ns = |ns: &str, args: &[&str]| {
            let mut command = Command::new("nsenter");
            command.arg(format!("--net=/proc/{ns}/ns/net")).args(["--", "ip"]).args(args);
            real::run("wiring the probe's client namespace", &mut command).map(|_| ())
        };
        let hub = self.hub.to_string();
        in_ns(&hub, &["link", "add", &self.link, "type", "veth", "peer", "name", "eth0", "netns", &pid])?;
        in_ns(&hub, &["link", "set", &self.link, "master", "br0", "up"])?;
        in_ns(&pid, &["link", "set", "lo", "up"])?;
        in_ns(&pid, &["addr", "add", &format!("{}/24", self.source), "dev", "eth0"])?;
        // The nodes' IPv6 link is the hub's bridge too: a client of dual-stack nodes reaches them
        // on either family, as e2e may dial a node's IPv6 InternalIP.
        let ipv6 = std::net::Ipv6Addr::new(0xfd00, 0x250, 0, 0, 0, 0, 0, u16::from(self.source.octets()[3]));
        in_ns(&pid, &["-6", "addr", "add", &format!("{ipv6}/64"), "dev", "eth0", "nodad"])?;
        in_ns(&pid, &["link", "set", "eth0", "up"])?;
        in_ns(&pid, &["route", "add", "default", "via", &real::HUB_IP.to_string()])?;
        // As a client on a cloud's network: it reaches load balancers through the hub only.
        let mut command = Command::new("nsenter");
        command.arg(format!("--net=/proc/{pid}/ns/net")).args([
            "--",
            "sh",
            "-c",
            "echo 0 > /proc/sys/net/ipv4/conf/all/accept_redirects",
        ]);
        real::run("wiring the probe's client namespace", &mut command).map(|_| ())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // Removed at once, not when the kernel gets round to the namespace: the next probe may
        // take the same address.
        let hub = format!("--net=/proc/{}/ns/net", self.hub);
        let _ = Command::new("nsenter").args([&hub, "--", "ip", "link", "del", &self.link]).output();
        let _ = Command::new("nsenter")
            .args([&hub, "--", "ip", "neigh", "del", &self.source.to_string(), "dev", "br0"])
            .output();
        let _ = self.holder.kill();
        let _ = self.holder.wait();
        let _ = fs::remove_file(&self.marker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_client_addresses_on_the_hub_network() {
        assert!(check_source(DEFAULT_SOURCE).is_ok());
        assert!(check_source(Ipv4Addr::new(10, 250, 0, 210)).is_ok());
        for bad in [Ipv4Addr::new(10, 250, 0, 10), Ipv4Addr::new(10, 250, 0, 1), Ipv4Addr::new(10, 250, 1, 250)] {
            let err = check_source(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("--source {bad}")) && err.contains("10.250.0.210-254"), "{err}");
        }
    }

    #[test]
    fn dial_reads_a_tcp_answer_and_names_a_refusal() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut asked = String::new();
            stream.read_to_string(&mut asked).unwrap();
            stream.write_all(format!("you said {asked}").as_bytes()).unwrap();
        });
        let ask = Dial {
            ip: Ipv4Addr::LOCALHOST.into(),
            port,
            udp: false,
            send: Some("hi".into()),
            timeout: Duration::from_secs(5),
        };
        assert_eq!(dial(&ask).unwrap(), "you said hi");
        server.join().unwrap();

        // Nothing listens there any more.
        let err = dial(&ask).unwrap_err();
        assert_eq!(err, format!("127.0.0.1:{port}/TCP: connection refused"));
    }

    #[test]
    fn dial_round_trips_udp_and_needs_something_to_send() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = server.local_addr().unwrap().port();
        let echo = std::thread::spawn(move || {
            let mut buffer = [0; 64];
            let (got, from) = server.recv_from(&mut buffer).unwrap();
            server.send_to(&buffer[..got], from).unwrap();
        });
        let ask = Dial {
            ip: Ipv4Addr::LOCALHOST.into(),
            port,
            udp: true,
            send: Some("echo".into()),
            timeout: Duration::from_secs(5),
        };
        assert_eq!(dial(&ask).unwrap(), "echo");
        echo.join().unwrap();
        let err = dial(&Dial { send: None, ..ask }).unwrap_err();
        assert!(err.contains("needs --send"), "{err}");
    }

    #[test]
    fn the_dial_repeats_as_lb_dial_arguments() {
        let ask = Dial {
            ip: Ipv4Addr::new(10, 250, 1, 1).into(),
            port: 53,
            udp: true,
            send: Some("hostname".into()),
            timeout: Duration::from_secs(3),
        };
        assert_eq!(
            ask.args(),
            ["cluster", "lb-dial", "--ip=10.250.1.1", "--port=53", "--timeout=3000ms", "--udp", "--send=hostname"]
        );
    }
}
