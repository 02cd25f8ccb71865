//! Deliberate bugs the reference CCM can be started with (the hidden `--testing-bugs` flag).
//!
//! They exist only so tests can prove the cloud-e2e suite catches a broken CCM: a CCM built from
//! this one with a bug on must fail the suite. Never turn one on for anything else.

use std::collections::BTreeSet;
use std::fmt;

use clap::ValueEnum;

/// One deliberate defect, named on the command line in kebab case (`keep-shutdown-taint`).
///
/// It exists only so tests can prove the cloud-e2e suite catches a broken CCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum Bug {
    /// cloud-node-lifecycle still adds `node.cloudprovider.kubernetes.io/shutdown` but never removes
    /// it from a node that is Ready again.
    KeepShutdownTaint,
    /// The service controller skips the cloud's `ensure_load_balancer_deleted` yet behaves as if it
    /// succeeded (events, finalizer removal), so the cloud keeps the load balancer.
    LeakLoadBalancers,
}

impl Bug {
    /// The name `--testing-bugs` takes, e.g. `keep-shutdown-taint`.
    pub fn name(self) -> &'static str {
        match self {
            Bug::KeepShutdownTaint => "keep-shutdown-taint",
            Bug::LeakLoadBalancers => "leak-load-balancers",
        }
    }
}

impl fmt::Display for Bug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The bugs a CCM runs with; empty (the default) for a correct CCM.
pub type Bugs = BTreeSet<Bug>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_command_line_values() {
        for bug in Bug::value_variants() {
            assert_eq!(bug.to_possible_value().unwrap().get_name(), bug.name());
            assert_eq!(<Bug as ValueEnum>::from_str(bug.name(), false), Ok(*bug));
        }
    }
}
