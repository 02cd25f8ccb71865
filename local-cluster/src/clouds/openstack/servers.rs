//! A node's server in Nova: stopped, started or deleted through Nova's API, as the cloud-e2e
//! hooks `shutdown_instance`, `start_instance` and `terminate_instance` ask; and the router's
//! routes, as the route controller left them.

use std::time::{Duration, Instant};

use serde_json::json;

use super::api::Session;
use super::{OpenstackState, cloud_err, error};
use crate::Result;
use crate::clouds::CloudErrorKind;

/// What happens to a node's server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAction {
    Stop,
    Start,
    Delete,
}

impl ServerAction {
    /// The status Nova reports once the action is done (`DELETED`: Nova no longer has it).
    pub fn settled_status(self) -> &'static str {
        match self {
            ServerAction::Stop => "SHUTOFF",
            ServerAction::Start => "ACTIVE",
            ServerAction::Delete => "DELETED",
        }
    }
}

/// Applies `action` to the server of node `node` as the cluster's user and waits until Nova
/// reports it done; returns the server's status then.
pub async fn act(state: &OpenstackState, node: &str, action: ServerAction) -> Result<String> {
    let id = state.server(node)?.to_owned();
    let session = Session::login(&state.credentials(false)).await.map_err(cloud_err)?;
    let path = format!("/servers/{id}");
    match action {
        ServerAction::Stop => post_action(&session, &id, json!({"os-stop": null}), "stopping a server").await?,
        ServerAction::Start => post_action(&session, &id, json!({"os-start": null}), "starting a server").await?,
        ServerAction::Delete => {
            session.delete("deleting a server", "compute", &path).await.map_err(cloud_err)?;
        }
    }
    let wanted = action.settled_status();
    let started = Instant::now();
    loop {
        let status = match session.get("reading a server", "compute", &path).await {
            Ok(server) => server["server"]["status"].as_str().unwrap_or_default().to_owned(),
            Err(e) if e.status.is_some_and(|s| s.as_u16() == 404) => "DELETED".to_owned(),
            Err(e) => return Err(cloud_err(e)),
        };
        if status == wanted {
            return Ok(status);
        }
        if status == "ERROR" || started.elapsed() > Duration::from_secs(60) {
            let kind = if status == "ERROR" { CloudErrorKind::Refused } else { CloudErrorKind::Timeout };
            return Err(error(kind, format!("the server of node {node} is {status}, not {wanted}"), ""));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn post_action(session: &Session, id: &str, body: serde_json::Value, what: &str) -> Result<()> {
    let path = format!("/servers/{id}/action");
    session.post(what, "compute", &path, body).await.map_err(cloud_err)?;
    Ok(())
}

/// The routes of the cluster's router, as Neutron holds them (`destination`, `nexthop`).
pub async fn router_routes(state: &OpenstackState) -> Result<Vec<serde_json::Value>> {
    let session = Session::login(&state.credentials(false)).await.map_err(cloud_err)?;
    let path = format!("/v2.0/routers/{}", state.router_id);
    let router = session.get("reading the router", "network", &path).await.map_err(cloud_err)?;
    Ok(router["router"]["routes"].as_array().cloned().unwrap_or_default())
}
