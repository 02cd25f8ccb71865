//! The local cloud's state — instances, load balancers, routes — and its JSON file.
//!
//! Every change is made on a copy, written (compact JSON) to `state.json.tmp`, renamed over
//! `state.json` and only then taken as the state, so the file and the memory never disagree, even
//! when a write fails. Each change rewrites the whole file: about 190 kB at 1,000 instances.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::api::{
    Address, AddressType, CreateInstance, CreateRoute, Instance, InstanceState, LoadBalancer, LoadBalancerSpec, Route,
};
use super::pool::IpPool;

/// The state file's name inside the state dir.
pub const STATE_FILE: &str = "state.json";

const DEFAULT_INSTANCE_TYPE: &str = "local.small";
const DEFAULT_ZONE: &str = "local-a";
const DEFAULT_REGION: &str = "local";

/// Why the state dir or file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state dir could not be created.
    #[error("cannot create state dir {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    /// The state file exists but could not be read.
    #[error("cannot read state file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    /// The state file is not valid local cloud state.
    #[error("state file {path} is corrupt: {source}")]
    Corrupt { path: PathBuf, source: serde_json::Error },
    /// The state file could not be written.
    #[error("cannot write state file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// Why a request against the state failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The named object does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// The change contradicts the current state.
    #[error("{0}")]
    Conflict(String),
    /// The request itself is malformed.
    #[error("{0}")]
    Invalid(String),
    /// The change could not be saved, so it was not made.
    #[error(transparent)]
    Persist(#[from] StoreError),
}

/// What the admin API can do to an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceAction {
    /// Running → shutdown.
    Shutdown,
    /// Shutdown → running.
    Start,
    /// Any live state → terminated, for good.
    Terminate,
}

/// Everything the cloud holds, as saved in the state file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Instances by ID, terminated ones included.
    #[serde(default)]
    instances: BTreeMap<String, Instance>,
    /// Load balancers by cluster, then name.
    #[serde(default)]
    load_balancers: BTreeMap<String, BTreeMap<String, LoadBalancer>>,
    /// Routes by cluster, then name.
    #[serde(default)]
    routes: BTreeMap<String, BTreeMap<String, Route>>,
}

impl State {
    /// All instances, terminated ones included.
    pub fn instances(&self) -> Vec<Instance> {
        self.instances.values().cloned().collect()
    }

    /// The instance with this ID.
    pub fn instance_by_id(&self, id: &str) -> Option<Instance> {
        self.instances.get(id).cloned()
    }

    /// The live instance with this name, or else a terminated one.
    pub fn instance_by_name(&self, name: &str) -> Option<Instance> {
        let mut named = self.instances.values().filter(|instance| instance.name == name);
        let live = named.clone().find(|instance| instance.state != InstanceState::Terminated);
        live.or_else(|| named.next()).cloned()
    }

    fn live_instance_id(&self, name: &str) -> Option<String> {
        self.instances
            .values()
            .find(|instance| instance.name == name && instance.state != InstanceState::Terminated)
            .map(|instance| instance.id.clone())
    }

    /// Adds a running instance named `request.name` with a fresh ID.
    pub fn create_instance(&mut self, request: CreateInstance) -> Result<Instance, StateError> {
        if request.name.is_empty() {
            return Err(StateError::Invalid("instance name must not be empty".into()));
        }
        if self.live_instance_id(&request.name).is_some() {
            return Err(StateError::Conflict(format!("a live instance named {:?} already exists", request.name)));
        }
        let instance = new_instance(self.fresh_instance_id(), request);
        self.instances.insert(instance.id.clone(), instance.clone());
        Ok(instance)
    }

    fn fresh_instance_id(&self) -> String {
        loop {
            let id = format!("i-{:08x}", fastrand::u32(..));
            if !self.instances.contains_key(&id) {
                return id;
            }
        }
    }

    /// Shuts down, starts or terminates the live instance named `name`.
    pub fn change_instance(&mut self, name: &str, action: InstanceAction) -> Result<Instance, StateError> {
        let id = self.live_instance_id(name).ok_or_else(|| StateError::NotFound(format!("live instance {name:?}")))?;
        let instance = self.instances.get_mut(&id).expect("the ID was just found");
        instance.state = match action {
            InstanceAction::Start => InstanceState::Running,
            InstanceAction::Shutdown => InstanceState::Shutdown,
            InstanceAction::Terminate => InstanceState::Terminated,
        };
        Ok(instance.clone())
    }

    /// All load balancers, or those of one cluster.
    pub fn load_balancers(&self, cluster: Option<&str>) -> Vec<LoadBalancer> {
        let clusters = self.load_balancers.iter().filter(|(name, _)| cluster.is_none_or(|wanted| wanted == *name));
        clusters.flat_map(|(_, by_name)| by_name.values().cloned()).collect()
    }

    /// The load balancer `name` of `cluster`.
    pub fn load_balancer(&self, cluster: &str, name: &str) -> Option<LoadBalancer> {
        self.load_balancers.get(cluster)?.get(name).cloned()
    }

    /// Creates the load balancer with an ingress IP from `pool`, or updates it keeping its IPs; the
    /// spec replaces everything else, source ranges included. A source range that is not a CIDR is
    /// invalid (kept as written otherwise).
    pub fn ensure_load_balancer(
        &mut self,
        cluster: &str,
        name: &str,
        spec: LoadBalancerSpec,
        pool: &IpPool,
    ) -> Result<LoadBalancer, StateError> {
        if let Some(bad) = spec.source_ranges.iter().find(|range| range.parse::<IpNet>().is_err()) {
            return Err(StateError::Invalid(format!("source_ranges: {bad:?} is not a CIDR (like 10.0.0.0/24)")));
        }
        if !(0..=i32::from(u16::MAX)).contains(&spec.health_check_node_port) {
            return Err(StateError::Invalid(format!(
                "health_check_node_port: {} is not a port (1-65535, or 0 for no health checks)",
                spec.health_check_node_port
            )));
        }
        let ingress_ips = match self.load_balancer(cluster, name) {
            Some(existing) => existing.ingress_ips,
            None => vec![self.allocate_ip(pool)?.to_string()],
        };
        let (cluster, name) = (cluster.to_owned(), name.to_owned());
        let LoadBalancerSpec { service, ports, backends, source_ranges, health_check_node_port, session_affinity } =
            spec;
        let balancer = LoadBalancer {
            cluster: cluster.clone(),
            name: name.clone(),
            service,
            ingress_ips,
            ports,
            backends,
            source_ranges,
            health_check_node_port,
            session_affinity,
        };
        self.load_balancers.entry(cluster).or_default().insert(name, balancer.clone());
        Ok(balancer)
    }

    fn allocate_ip(&self, pool: &IpPool) -> Result<Ipv4Addr, StateError> {
        let used: BTreeSet<Ipv4Addr> = self
            .load_balancers
            .values()
            .flat_map(BTreeMap::values)
            .flat_map(|balancer| balancer.ingress_ips.iter().filter_map(|ip| ip.parse().ok()))
            .collect();
        pool.first_free(&used).ok_or_else(|| StateError::Conflict(format!("IP pool {pool} is exhausted")))
    }

    /// Points the existing load balancer at `backends`.
    pub fn update_backends(
        &mut self,
        cluster: &str,
        name: &str,
        backends: Vec<String>,
    ) -> Result<LoadBalancer, StateError> {
        let balancer = self
            .load_balancers
            .get_mut(cluster)
            .and_then(|by_name| by_name.get_mut(name))
            .ok_or_else(|| StateError::NotFound(format!("load balancer {cluster}/{name}")))?;
        balancer.backends = backends;
        Ok(balancer.clone())
    }

    /// Deletes the load balancer, freeing its ingress IPs.
    pub fn delete_load_balancer(&mut self, cluster: &str, name: &str) -> Result<LoadBalancer, StateError> {
        let by_name = self.load_balancers.get_mut(cluster);
        let removed = by_name.and_then(|by_name| by_name.remove(name));
        let removed = removed.ok_or_else(|| StateError::NotFound(format!("load balancer {cluster}/{name}")))?;
        self.load_balancers.retain(|_, by_name| !by_name.is_empty());
        Ok(removed)
    }

    /// All routes, or those of one cluster, each marked blackhole when its target has no live instance.
    pub fn routes(&self, cluster: Option<&str>) -> Vec<Route> {
        let clusters = self.routes.iter().filter(|(name, _)| cluster.is_none_or(|wanted| wanted == *name));
        let routes = clusters.flat_map(|(_, by_name)| by_name.values());
        routes
            .map(|route| Route { blackhole: self.live_instance_id(&route.target_node).is_none(), ..route.clone() })
            .collect()
    }

    /// Creates the route; creating the same route again returns it, while another target for its CIDR conflicts.
    pub fn create_route(&mut self, cluster: &str, request: CreateRoute) -> Result<Route, StateError> {
        let cidr: IpNet = request.destination_cidr.parse().map_err(|_| {
            StateError::Invalid(format!("destination CIDR {:?} is not a CIDR", request.destination_cidr))
        })?;
        let table = self.routes.entry(cluster.to_owned()).or_default();
        if let Some(existing) = table.values().find(|route| route.destination_cidr == cidr.to_string()) {
            if existing.target_node == request.target_node {
                return Ok(existing.clone());
            }
            return Err(StateError::Conflict(format!("{cidr} is already routed to {}", existing.target_node)));
        }
        let name = route_name(&request.name_hint, &cidr);
        let route = Route {
            cluster: cluster.to_owned(),
            name: name.clone(),
            target_node: request.target_node,
            destination_cidr: cidr.to_string(),
            blackhole: false,
        };
        table.insert(name, route.clone());
        Ok(route)
    }

    /// Deletes the route `name` of `cluster`.
    pub fn delete_route(&mut self, cluster: &str, name: &str) -> Result<Route, StateError> {
        let removed = self.routes.get_mut(cluster).and_then(|table| table.remove(name));
        let removed = removed.ok_or_else(|| StateError::NotFound(format!("route {cluster}/{name}")))?;
        self.routes.retain(|_, table| !table.is_empty());
        Ok(removed)
    }
}

fn new_instance(id: String, request: CreateInstance) -> Instance {
    let addresses = if request.addresses.is_empty() {
        vec![Address { kind: AddressType::Hostname, address: request.name.clone() }]
    } else {
        request.addresses
    };
    Instance {
        id,
        name: request.name,
        instance_type: request.instance_type.unwrap_or_else(|| DEFAULT_INSTANCE_TYPE.into()),
        zone: request.zone.unwrap_or_else(|| DEFAULT_ZONE.into()),
        region: request.region.unwrap_or_else(|| DEFAULT_REGION.into()),
        addresses,
        state: InstanceState::Running,
    }
}

/// `<hint>-<cidr with separators as dashes>`, so a node's IPv4 and IPv6 routes get distinct, stable names.
fn route_name(name_hint: &str, cidr: &IpNet) -> String {
    let hint = if name_hint.is_empty() { "route" } else { name_hint };
    let cidr: String = cidr.to_string().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    format!("{hint}-{cidr}")
}

/// The state and the file it is saved in.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    state: Mutex<State>,
}

impl Store {
    /// Opens the state in `dir`, creating the dir, and starting empty if it has no state file.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir { path: dir.to_owned(), source })?;
        let path = dir.join(STATE_FILE);
        let state = load(&path)?;
        Ok(Store { path, state: Mutex::new(state) })
    }

    /// The state file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the state.
    pub fn read<T>(&self, read: impl FnOnce(&State) -> T) -> T {
        read(&self.lock())
    }

    /// Applies `change` to a copy of the state, saves the copy and makes it the state.
    pub fn update<T>(&self, change: impl FnOnce(&mut State) -> Result<T, StateError>) -> Result<T, StateError> {
        let mut current = self.lock();
        let mut next = current.clone();
        let answer = change(&mut next)?;
        save(&self.path, &next)?;
        *current = next;
        Ok(answer)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-made change: changes are made on a copy.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn load(path: &Path) -> Result<State, StoreError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(State::default()),
        Err(source) => return Err(StoreError::Read { path: path.to_owned(), source }),
    };
    serde_json::from_str(&text).map_err(|source| StoreError::Corrupt { path: path.to_owned(), source })
}

fn save(path: &Path, state: &State) -> Result<(), StoreError> {
    let temporary = path.with_extension("json.tmp");
    let write_error = |source| StoreError::Write { path: path.to_owned(), source };
    let json = serde_json::to_vec(state).expect("the state serialises");
    let mut file = fs::File::create(&temporary).map_err(write_error)?;
    // No fsync: the rename already survives a crash of the cloud, and an fsync per change costs milliseconds.
    file.write_all(&json).map_err(write_error)?;
    fs::rename(&temporary, path).map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SessionAffinity;

    fn create(state: &mut State, name: &str) -> Instance {
        state.create_instance(CreateInstance { name: name.into(), ..CreateInstance::default() }).unwrap()
    }

    #[test]
    fn new_instance_takes_defaults_and_an_id() {
        let instance = create(&mut State::default(), "node-1");

        assert!(instance.id.starts_with("i-") && instance.id.len() == 10, "{}", instance.id);
        assert!(instance.id[2..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!((instance.zone.as_str(), instance.region.as_str()), (DEFAULT_ZONE, DEFAULT_REGION));
        assert_eq!(instance.addresses, vec![Address { kind: AddressType::Hostname, address: "node-1".into() }]);
    }

    #[test]
    fn a_name_is_reusable_only_after_termination() {
        let mut state = State::default();
        let first = create(&mut state, "node-1");

        let duplicate = state.create_instance(CreateInstance { name: "node-1".into(), ..CreateInstance::default() });
        assert!(matches!(duplicate, Err(StateError::Conflict(_))));

        state.change_instance("node-1", InstanceAction::Terminate).unwrap();
        let second = create(&mut state, "node-1");
        assert_ne!(first.id, second.id);
        assert_eq!(state.instance_by_name("node-1").unwrap().id, second.id);
        assert_eq!(state.instance_by_id(&first.id).unwrap().state, InstanceState::Terminated);
    }

    #[test]
    fn terminated_instances_cannot_be_started() {
        let mut state = State::default();
        create(&mut state, "node-1");
        state.change_instance("node-1", InstanceAction::Terminate).unwrap();

        assert!(matches!(state.change_instance("node-1", InstanceAction::Start), Err(StateError::NotFound(_))));
    }

    #[test]
    fn routes_to_missing_instances_are_blackholes_and_names_are_per_cidr() {
        let mut state = State::default();
        create(&mut state, "node-1");
        let request = |target: &str, cidr: &str| CreateRoute {
            name_hint: "uid-1".into(),
            target_node: target.into(),
            destination_cidr: cidr.into(),
        };
        let v4 = state.create_route("c", request("node-1", "10.244.1.0/24")).unwrap();
        let v6 = state.create_route("c", request("node-1", "fd00:10:244:1::/64")).unwrap();
        state.create_route("c", request("gone", "10.244.2.0/24")).unwrap();

        assert_eq!(v4.name, "uid-1-10-244-1-0-24");
        assert_ne!(v4.name, v6.name);
        let blackholes: Vec<_> = state.routes(Some("c")).into_iter().filter(|r| r.blackhole).collect();
        assert_eq!(blackholes.len(), 1);
        assert_eq!(blackholes[0].target_node, "gone");
    }

    #[test]
    fn a_cidr_routes_to_one_target_only() {
        let mut state = State::default();
        let request = |target: &str| CreateRoute {
            name_hint: String::new(),
            target_node: target.into(),
            destination_cidr: "10.244.1.0/24".into(),
        };
        let first = state.create_route("c", request("a")).unwrap();

        assert_eq!(state.create_route("c", request("a")).unwrap(), first);
        assert!(matches!(state.create_route("c", request("b")), Err(StateError::Conflict(_))));
        assert!(matches!(
            state.create_route("c", CreateRoute { destination_cidr: "nope".into(), ..request("a") }),
            Err(StateError::Invalid(_))
        ));
    }

    #[test]
    fn exhausted_pool_is_a_conflict() {
        let mut state = State::default();
        let pool: IpPool = "127.0.0.7/32".parse().unwrap();
        state.ensure_load_balancer("c", "a", LoadBalancerSpec::default(), &pool).unwrap();

        let second = state.ensure_load_balancer("c", "b", LoadBalancerSpec::default(), &pool);

        assert!(matches!(second, Err(StateError::Conflict(message)) if message.contains("exhausted")));
    }

    #[test]
    fn load_balancers_keep_valid_source_ranges_and_refuse_others() {
        let mut state = State::default();
        let pool: IpPool = "127.0.0.0/29".parse().unwrap();
        let spec = |ranges: &[&str]| LoadBalancerSpec {
            source_ranges: ranges.iter().map(|r| r.to_string()).collect(),
            ..LoadBalancerSpec::default()
        };
        state.ensure_load_balancer("c", "a", spec(&["10.0.0.0/8", "fd00::/64"]), &pool).unwrap();
        state.update_backends("c", "a", vec!["n1".into()]).unwrap();
        assert_eq!(state.load_balancer("c", "a").unwrap().source_ranges, ["10.0.0.0/8", "fd00::/64"]);

        let bad = state.ensure_load_balancer("c", "a", spec(&["10.0.0.0/8", "10.0.0.0/33"]), &pool);

        assert!(
            matches!(&bad, Err(StateError::Invalid(m)) if m.contains("source_ranges") && m.contains("/33")),
            "{bad:?}"
        );
        assert_eq!(state.load_balancer("c", "a").unwrap().source_ranges, ["10.0.0.0/8", "fd00::/64"]);
        assert!(state.ensure_load_balancer("c", "b", spec(&["nope"]), &pool).is_err());
        assert!(state.load_balancer("c", "b").is_none());
    }

    #[test]
    fn health_checks_and_affinity_are_kept_and_a_port_out_of_range_refused() {
        let mut state = State::default();
        let pool: IpPool = "127.0.0.0/29".parse().unwrap();
        let spec = |port: i32| LoadBalancerSpec {
            health_check_node_port: port,
            session_affinity: SessionAffinity::ClientIp,
            ..LoadBalancerSpec::default()
        };
        state.ensure_load_balancer("c", "a", spec(31234), &pool).unwrap();
        state.update_backends("c", "a", vec!["n1".into()]).unwrap();
        let kept = state.load_balancer("c", "a").unwrap();
        assert_eq!((kept.health_check_node_port, kept.session_affinity), (31234, SessionAffinity::ClientIp));

        for bad in [-1, 65536] {
            let refused = state.ensure_load_balancer("c", "a", spec(bad), &pool);
            assert!(
                matches!(&refused, Err(StateError::Invalid(m)) if m.contains("health_check_node_port") && m.contains(&bad.to_string())),
                "{refused:?}"
            );
        }
        assert_eq!(state.load_balancer("c", "a").unwrap().health_check_node_port, 31234);
        let json = serde_json::to_value(state.load_balancer("c", "a").unwrap()).unwrap();
        assert_eq!(json["session_affinity"], "ClientIP", "Kubernetes' own spelling");
    }

    #[test]
    fn state_saved_before_source_ranges_still_loads() {
        let old = r#"{"load_balancers": {"c": {"a": {"cluster": "c", "name": "a", "service": "default/s",
            "ingress_ips": ["127.0.0.1"], "ports": [], "backends": ["n1"]}}}}"#;

        let state: State = serde_json::from_str(old).unwrap();

        let balancer = state.load_balancer("c", "a").unwrap();
        assert_eq!((balancer.backends.as_slice(), balancer.source_ranges.len()), (&["n1".to_string()][..], 0));
        assert_eq!((balancer.health_check_node_port, balancer.session_affinity), (0, SessionAffinity::None));
    }

    #[test]
    fn failed_save_leaves_state_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // A directory where the temporary file should go makes the write fail.
        fs::create_dir(dir.path().join("state.json.tmp")).unwrap();

        let result =
            store.update(|state| state.create_instance(CreateInstance { name: "n".into(), ..Default::default() }));

        assert!(matches!(result, Err(StateError::Persist(StoreError::Write { .. }))));
        assert!(store.read(State::instances).is_empty());
    }
}
