//! One harness process at a time per cluster name: `up` holds the name while it brings the cluster
//! up, and `harness run` for its whole run, so a second one is refused with the holder's PID and
//! command line instead of clearing the first one's state half way through. The hold is a lock
//! file beside the cluster's directory (`clusters/<name>.lock`, see [`cli_support::exclusive`]);
//! within one process it is shared, so a run's `up` takes the hold its run already has.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use cli_support::exclusive::{self, Hold, HoldError};
use cli_support::roots::state_root;

use crate::{ClusterError, Result};

/// This process's hold on a cluster name; the name is free again once every clone is dropped.
#[derive(Debug, Clone)]
pub struct ClusterHold(#[allow(dead_code)] Arc<Hold>);

/// The holds this process has, by cluster name.
static HELD: Mutex<BTreeMap<String, Weak<Hold>>> = Mutex::new(BTreeMap::new());

/// Holds cluster name `name` for this process, or says which process has it.
pub fn hold(name: &str) -> Result<ClusterHold> {
    crate::validate_name(name)?;
    let mut held = HELD.lock().expect("no panic while holding it");
    if let Some(hold) = held.get(name).and_then(Weak::upgrade) {
        return Ok(ClusterHold(hold));
    }
    let path = state_root().join("clusters").join(format!("{name}.lock"));
    let hold = match exclusive::hold_file(&path) {
        Ok(hold) => Arc::new(hold),
        Err(HoldError::Held { holder, .. }) => return Err(ClusterError::InUse { name: name.to_owned(), holder }),
        Err(HoldError::Io { path, source }) => return Err(ClusterError::Io { action: "locking", path, source }),
    };
    held.retain(|_, hold| hold.strong_count() > 0);
    held.insert(name.to_owned(), Arc::downgrade(&hold));
    Ok(ClusterHold(hold))
}
