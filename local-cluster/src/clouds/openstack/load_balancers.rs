//! The cluster's load balancers as Octavia holds them, for the cloud-e2e hook
//! `list_load_balancers` (`harness cluster load-balancers`): what the CCM asked Octavia for, read
//! back through Octavia's own API.

use serde_json::{Value, json};

use super::api::Session;
use super::{OpenstackState, cloud_err};
use crate::Result;

const LBAAS: &str = "/v2/lbaas";

/// Each load balancer of the cluster's project: its name and description (the CCM writes the
/// service's `namespace/name` there), VIP, statuses, listeners (protocol, port, allowed CIDRs),
/// pools with their members (the CCM names a member after its node), and `backends`, the
/// members' names.
pub async fn list(state: &OpenstackState) -> Result<Vec<Value>> {
    let session = Session::login(&state.credentials(false)).await.map_err(cloud_err)?;
    let get = |what: &'static str, path: String| {
        let session = &session;
        async move { session.get(what, "load-balancer", &path).await.map_err(cloud_err) }
    };
    let balancers = get("listing load balancers", format!("{LBAAS}/loadbalancers")).await?;
    let listeners = get("listing listeners", format!("{LBAAS}/listeners")).await?;
    let pools = get("listing pools", format!("{LBAAS}/pools")).await?;
    let mut pools_with_members = Vec::new();
    for pool in items(&pools, "pools") {
        let id = pool["id"].as_str().unwrap_or_default();
        let members = get("listing a pool's members", format!("{LBAAS}/pools/{id}/members")).await?;
        pools_with_members.push((pool, items(&members, "members").to_vec()));
    }
    Ok(items(&balancers, "loadbalancers")
        .iter()
        .map(|lb| {
            let id = lb["id"].as_str().unwrap_or_default();
            let listeners: Vec<Value> = items(&listeners, "listeners")
                .iter()
                .filter(|l| belongs_to(l, id))
                .map(|l| json!({"protocol": l["protocol"], "port": l["protocol_port"], "allowed_cidrs": l["allowed_cidrs"]}))
                .collect();
            let pools: Vec<(&Value, &Vec<Value>)> =
                pools_with_members.iter().filter(|(p, _)| belongs_to(p, id)).map(|(p, m)| (*p, m)).collect();
            let backends: Vec<&Value> = pools.iter().flat_map(|(_, members)| members.iter().map(|m| &m["name"])).collect();
            let pools: Vec<Value> = pools
                .iter()
                .map(|(pool, members)| {
                    let members: Vec<Value> = members
                        .iter()
                        .map(|m| json!({"name": m["name"], "address": m["address"], "port": m["protocol_port"]}))
                        .collect();
                    json!({"protocol": pool["protocol"], "lb_algorithm": pool["lb_algorithm"], "members": members})
                })
                .collect();
            json!({
                "id": id,
                "name": lb["name"],
                "description": lb["description"],
                "vip_address": lb["vip_address"],
                "provisioning_status": lb["provisioning_status"],
                "operating_status": lb["operating_status"],
                "listeners": listeners,
                "pools": pools,
                "backends": backends,
            })
        })
        .collect())
}

fn items<'a>(reply: &'a Value, key: &str) -> &'a [Value] {
    reply[key].as_array().map_or(&[], Vec::as_slice)
}

/// Whether a listener or pool is the load balancer `id`'s (Octavia lists its `loadbalancers`).
fn belongs_to(child: &Value, id: &str) -> bool {
    items(child, "loadbalancers").iter().any(|lb| lb["id"] == id)
}
