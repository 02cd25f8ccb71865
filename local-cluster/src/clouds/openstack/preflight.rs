//! What the harness checks of a CCM's `--cloud-config` before it starts the CCM on the OpenStack
//! cloud: that Keystone takes its credentials, and that every network and subnet it names exists. The CCM
//! itself would exit on the first (its log's last lines) and, on the second, drop the addresses of
//! every node and never initialise one: the run would wait out its time-out for nothing.

use std::collections::BTreeMap;
use std::path::Path;

use super::api::{Credentials, Session};
use super::error;
use crate::Result;
use crate::clouds::CloudErrorKind;

/// A cloud config as gcfg reads it: `[section]` → key → values (a key may repeat).
pub type Ini = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// Parses gcfg's INI: sections and subsections are lower-cased, `;` and `#` start comments, a value
/// may be double-quoted.
pub fn parse(text: &str) -> std::result::Result<Ini, String> {
    let mut ini = Ini::new();
    let mut section = None::<String>;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_ascii_lowercase();
            ini.entry(name.clone()).or_default();
            section = Some(name);
            continue;
        }
        let Some(current) = &section else {
            return Err(format!("line {}: `{line}` is outside any [section]", number + 1));
        };
        let (key, value) = line.split_once('=').unwrap_or((line, "true"));
        let value = value.trim();
        let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
        let keys = ini.get_mut(current).expect("the section was inserted");
        keys.entry(key.trim().to_ascii_lowercase()).or_default().push(value.to_owned());
    }
    Ok(ini)
}

fn first<'a>(ini: &'a Ini, section: &str, key: &str) -> Option<&'a str> {
    ini.get(section)?.get(key)?.last().map(String::as_str)
}

fn all<'a>(ini: &'a Ini, section: &str, key: &str) -> &'a [String] {
    ini.get(section).and_then(|keys| keys.get(key)).map_or(&[], Vec::as_slice)
}

/// Logs in with the credentials of the cloud config at `path` and looks up every network its
/// `[Networking]` names; a refusal or a missing network is an error naming the file and the key.
pub async fn check_cloud_config(path: &Path) -> Result<()> {
    let refuse =
        |detail: String| error(CloudErrorKind::Invalid, format!("the CCM's cloud config {}", path.display()), detail);
    let text = std::fs::read_to_string(path).map_err(|e| refuse(format!("cannot read it: {e}")))?;
    let ini = parse(&text).map_err(refuse)?;
    let global = |key: &str| first(&ini, "global", key).map(str::to_owned);
    let credentials = Credentials {
        auth_url: global("auth-url").ok_or_else(|| refuse("[Global] has no auth-url".into()))?,
        username: global("username").unwrap_or_default(),
        password: global("password").unwrap_or_default(),
        project: global("tenant-name").or_else(|| global("project-name")).unwrap_or_default(),
    };
    let session = match Session::login(&credentials).await {
        Ok(session) => session,
        Err(e) if e.status.is_some_and(|s| s.as_u16() == 401) => {
            return Err(refuse(format!(
                "Keystone refuses its credentials ([Global] username = {}, tenant-name = {}, and its password): {}; \
                 the cluster's own are in its openstack-cloud.conf",
                credentials.username, credentials.project, e.detail
            )));
        }
        Err(e) => return Err(refuse(e.to_string())),
    };
    let networks =
        session.get("listing networks", "network", "/v2.0/networks").await.map_err(|e| refuse(e.to_string()))?;
    let names: Vec<&str> =
        networks["networks"].as_array().into_iter().flatten().filter_map(|n| n["name"].as_str()).collect();
    for key in ["internal-network-name", "public-network-name"] {
        for wanted in all(&ini, "networking", key) {
            if !names.contains(&wanted.as_str()) {
                return Err(refuse(format!(
                    "[Networking] {key} = {wanted}: no such network in project {}; its networks are: {}",
                    credentials.project,
                    names.join(", ")
                )));
            }
        }
    }
    check_load_balancer_ids(&session, &ini, &refuse).await
}

/// Every subnet and network `[LoadBalancer]` names by id exists. Octavia's no-op network driver
/// takes any id, so a wrong one would give load balancers on a subnet that is not there.
async fn check_load_balancer_ids(
    session: &Session,
    ini: &Ini,
    refuse: &impl Fn(String) -> crate::ClusterError,
) -> Result<()> {
    for (kind, keys) in
        [("subnet", ["subnet-id", "member-subnet-id"]), ("network", ["network-id", "floating-network-id"])]
    {
        let named: Vec<(&str, &str)> =
            keys.iter().filter_map(|key| Some((*key, first(ini, "loadbalancer", key)?))).collect();
        if named.is_empty() {
            continue;
        }
        let listing = format!("{kind}s");
        let found = session
            .get(&format!("listing {listing}"), "network", &format!("/v2.0/{listing}"))
            .await
            .map_err(|e| refuse(e.to_string()))?;
        let ids: Vec<&str> =
            found[&listing].as_array().into_iter().flatten().filter_map(|n| n["id"].as_str()).collect();
        for (key, wanted) in named {
            if !ids.contains(&wanted) {
                return Err(refuse(format!(
                    "[LoadBalancer] {key} = {wanted}: no such {kind}; the {listing} are: {}",
                    ids.join(", ")
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcfg_sections_keys_repeats_quotes_and_comments() {
        let text = "; a comment\n[Global]\nauth-url = http://k/v3\nPassword = \"p w\"\n\n[Networking]\n\
                    internal-network-name = a\ninternal-network-name=b\n# done\n";
        let ini = parse(text).unwrap();
        assert_eq!(first(&ini, "global", "auth-url"), Some("http://k/v3"));
        assert_eq!(first(&ini, "global", "password"), Some("p w"));
        assert_eq!(all(&ini, "networking", "internal-network-name"), ["a", "b"]);
        assert!(all(&ini, "networking", "public-network-name").is_empty());
    }

    #[test]
    fn a_key_outside_any_section_is_refused_with_its_line() {
        assert_eq!(parse("\nusername = x\n").unwrap_err(), "line 2: `username = x` is outside any [section]");
    }
}
