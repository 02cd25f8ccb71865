//! What real nodes must leave as it was on the machine, read without changing anything: the root
//! network namespace's links and iptables rules, and the global sysctls kubelet would write.

use std::collections::BTreeSet;

/// Links in the root network namespace (read-only: `/sys/class/net` of this process's namespace).
pub fn root_links() -> BTreeSet<String> {
    std::fs::read_dir("/sys/class/net")
        .map(|entries| entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default()
}

/// The global sysctls kubelet would set if its node did not mask them.
pub fn global_sysctls() -> Vec<(String, String)> {
    ["vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops"]
        .iter()
        .map(|s| (s.to_string(), std::fs::read_to_string(format!("/proc/sys/{s}")).unwrap_or_default()))
        .collect()
}

/// The root network namespace's iptables rules (read-only), if iptables-save can list them.
pub fn root_iptables() -> Option<String> {
    let output = std::process::Command::new("iptables-save").output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    // Its comment lines carry the time of the listing.
    Some(text.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n"))
}

/// The three at once, to compare before and after a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSnapshot {
    pub links: BTreeSet<String>,
    pub iptables: Option<String>,
    pub sysctls: Vec<(String, String)>,
}

impl HostSnapshot {
    pub fn take() -> Self {
        HostSnapshot { links: root_links(), iptables: root_iptables(), sysctls: global_sysctls() }
    }

    /// What changed since `self` (empty when nothing did), one line per kind.
    pub fn changes_since(&self) -> Vec<String> {
        let now = HostSnapshot::take();
        let mut changes = Vec::new();
        if now.links != self.links {
            changes.push(format!("root namespace links: {:?} -> {:?}", self.links, now.links));
        }
        if now.iptables != self.iptables {
            changes.push("the root namespace's iptables rules changed".to_owned());
        }
        if now.sysctls != self.sysctls {
            changes.push(format!("global sysctls: {:?} -> {:?}", self.sysctls, now.sysctls));
        }
        changes
    }
}
