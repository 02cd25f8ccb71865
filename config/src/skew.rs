//! Kubernetes' version-skew policy (kubernetes.io/releases/version-skew-policy) as the rules an
//! upgrade run is checked against before it starts: every state the cluster passes through, one
//! component at a time, upgrading in the run's order and rolling back in the reverse one.
//!
//! - kube-apiserver upgrades one minor at a time;
//! - kubelet and kube-proxy must not be newer than kube-apiserver, and may be up to three minors older;
//! - kube-controller-manager, kube-scheduler and the cloud-controller-manager must not be newer
//!   than kube-apiserver, and may be one minor older (which is what lets them upgrade live).

use std::fmt;

use crate::KubernetesVersion;

/// A component whose version the policy constrains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    KubeApiserver,
    KubeControllerManager,
    KubeScheduler,
    Kubelet,
    KubeProxy,
    CloudControllerManager,
}

impl Component {
    pub const ALL: [Component; 6] = [
        Component::KubeApiserver,
        Component::KubeControllerManager,
        Component::KubeScheduler,
        Component::Kubelet,
        Component::KubeProxy,
        Component::CloudControllerManager,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Component::KubeApiserver => "kube-apiserver",
            Component::KubeControllerManager => "kube-controller-manager",
            Component::KubeScheduler => "kube-scheduler",
            Component::Kubelet => "kubelet",
            Component::KubeProxy => "kube-proxy",
            Component::CloudControllerManager => "cloud-controller-manager",
        }
    }

    /// How many minors older than kube-apiserver it may be (none may be newer).
    fn minors_behind_allowed(self) -> u32 {
        match self {
            Component::KubeApiserver => 0,
            Component::Kubelet | Component::KubeProxy => 3,
            Component::KubeControllerManager | Component::KubeScheduler | Component::CloudControllerManager => 1,
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an upgrade run upgrades at once, in its `--upgrade-order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Stage {
    /// kube-apiserver, then kube-controller-manager, then kube-scheduler.
    ControlPlane,
    /// Each node's kubelet and kube-proxy, one node at a time (cordoned and drained).
    Nodes,
    /// The cloud-controller-manager.
    Ccm,
}

impl Stage {
    /// The order the policy requires: the control plane first, then the nodes, then the CCM.
    pub const REQUIRED_ORDER: [Stage; 3] = [Stage::ControlPlane, Stage::Nodes, Stage::Ccm];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::ControlPlane => "control-plane",
            Stage::Nodes => "nodes",
            Stage::Ccm => "ccm",
        }
    }

    /// The components it changes, in the order it changes them when upgrading.
    pub fn components(self) -> &'static [Component] {
        match self {
            Stage::ControlPlane => {
                &[Component::KubeApiserver, Component::KubeControllerManager, Component::KubeScheduler]
            }
            Stage::Nodes => &[Component::Kubelet, Component::KubeProxy],
            Stage::Ccm => &[Component::CloudControllerManager],
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pair or an order the policy forbids, naming the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkewError {
    #[error(
        "--upgrade-from {from} --kubernetes {to}: an upgrade goes to a newer release of the same major; to roll back, \
         run the upgrade from the older release (a run rolls back itself after upgrading)"
    )]
    NotNewer { from: String, to: String },
    #[error(
        "--upgrade-from {from} --kubernetes {to}: the version-skew policy upgrades kube-apiserver one minor at a time \
         ({from} → {to} skips {skipped}); upgrade to {next} first"
    )]
    SkipsAMinor { from: String, to: String, skipped: String, next: String },
    #[error(
        "--upgrade-order {order}: it must name each of control-plane, nodes and ccm once (the default is \
         control-plane,nodes,ccm)"
    )]
    NotEachStageOnce { order: String },
    #[error(
        "--upgrade-order {order}: while {doing}, {component} would run {version} against kube-apiserver {apiserver}, \
         and the version-skew policy says {rule}; upgrade in the order control-plane,nodes,ccm, or pass \
         --allow-skew-violation to run it as a negative test"
    )]
    Violation { order: String, doing: String, component: Component, version: String, apiserver: String, rule: String },
}

/// The minor each component runs at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Minors([(Component, u32); 6]);

impl Minors {
    fn all_at(minor: u32) -> Self {
        Minors(Component::ALL.map(|c| (c, minor)))
    }

    fn set(&mut self, component: Component, minor: u32) {
        for entry in self.0.iter_mut().filter(|(c, _)| *c == component) {
            entry.1 = minor;
        }
    }

    fn of(&self, component: Component) -> u32 {
        self.0.iter().find(|(c, _)| *c == component).map_or(0, |(_, m)| *m)
    }

    /// The first component the policy forbids at these minors, and its rule.
    fn violation(&self) -> Option<(Component, String)> {
        let apiserver = self.of(Component::KubeApiserver);
        self.0.iter().find_map(|&(component, minor)| {
            let behind = component.minors_behind_allowed();
            if minor > apiserver {
                Some((component, format!("{component} must not be newer than kube-apiserver")))
            } else if apiserver - minor > behind {
                let allowed = match behind {
                    1 => "one minor".to_owned(),
                    n => format!("{n} minors"),
                };
                Some((component, format!("{component} may be at most {allowed} older than kube-apiserver")))
            } else {
                None
            }
        })
    }
}

/// Checks an upgrade from `from` to `to` in `order`, and its rollback in the reverse order,
/// against the policy, one component at a time. `allow_violation` lets an order the policy forbids
/// through (a negative test); a pair it forbids never is.
pub fn check_upgrade(
    from: &KubernetesVersion,
    to: &KubernetesVersion,
    order: &[Stage],
    allow_violation: bool,
) -> Result<(), SkewError> {
    let pair = || (from.to_string(), to.to_string());
    if to.major != from.major || (to.minor, to.patch) <= (from.minor, from.patch) {
        let (from, to) = pair();
        return Err(SkewError::NotNewer { from, to });
    }
    if to.minor > from.minor + 1 {
        let (from_text, to_text) = pair();
        let skipped = (from.minor + 1..to.minor).map(|m| format!("1.{m}")).collect::<Vec<_>>().join(", ");
        let next = format!("v{}.{}", from.major, from.minor + 1);
        return Err(SkewError::SkipsAMinor { from: from_text, to: to_text, skipped, next });
    }
    let order_text = order.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",");
    let each_once =
        order.len() == Stage::REQUIRED_ORDER.len() && Stage::REQUIRED_ORDER.iter().all(|s| order.contains(s));
    if !each_once {
        return Err(SkewError::NotEachStageOnce { order: order_text });
    }
    if allow_violation {
        return Ok(());
    }
    let version = |minor: u32| if minor == to.minor { to.to_string() } else { from.to_string() };
    let mut minors = Minors::all_at(from.minor);
    let walk = order
        .iter()
        .map(|s| (*s, to.minor, "upgrading"))
        .chain(order.iter().rev().map(|s| (*s, from.minor, "rolling back")));
    for (stage, minor, doing) in walk {
        let components: Vec<Component> = match doing {
            "upgrading" => stage.components().to_vec(),
            _ => stage.components().iter().rev().copied().collect(),
        };
        for component in components {
            minors.set(component, minor);
            if let Some((component, rule)) = minors.violation() {
                return Err(SkewError::Violation {
                    order: order_text,
                    doing: format!("{doing} the {stage} stage"),
                    component,
                    version: version(minors.of(component)),
                    apiserver: version(minors.of(Component::KubeApiserver)),
                    rule,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> KubernetesVersion {
        text.parse().unwrap()
    }

    const REQUIRED: &[Stage] = &Stage::REQUIRED_ORDER;

    #[test]
    fn the_required_order_upgrades_and_rolls_back_within_the_policy() {
        assert_eq!(check_upgrade(&v("v1.36.4"), &v("v1.37.1"), REQUIRED, false), Ok(()));
        assert_eq!(check_upgrade(&v("v1.37.0"), &v("v1.37.1"), REQUIRED, false), Ok(()), "a patch upgrade");
    }

    #[test]
    fn nodes_before_the_control_plane_is_refused_naming_the_kubelet_rule() {
        let order = [Stage::Nodes, Stage::ControlPlane, Stage::Ccm];
        let error = check_upgrade(&v("v1.36.4"), &v("v1.37.1"), &order, false).unwrap_err();
        let SkewError::Violation { component, rule, version, apiserver, .. } = &error else { panic!("{error}") };
        assert_eq!(*component, Component::Kubelet);
        assert_eq!(rule, "kubelet must not be newer than kube-apiserver");
        assert_eq!((version.as_str(), apiserver.as_str()), ("v1.37.1", "v1.36.4"));
        assert!(error.to_string().contains("--allow-skew-violation"), "{error}");
        // A negative test asks for it.
        assert_eq!(check_upgrade(&v("v1.36.4"), &v("v1.37.1"), &order, true), Ok(()));
    }

    #[test]
    fn the_ccm_before_the_control_plane_is_refused() {
        let order = [Stage::Ccm, Stage::ControlPlane, Stage::Nodes];
        let error = check_upgrade(&v("v1.36.4"), &v("v1.37.1"), &order, false).unwrap_err();
        assert!(
            error.to_string().contains("cloud-controller-manager must not be newer than kube-apiserver"),
            "{error}"
        );
    }

    #[test]
    fn the_nodes_last_is_allowed_but_rolling_them_back_last_is_the_reverse_order_and_also_allowed() {
        // Control plane, CCM, nodes: kubelets one minor behind a while, which the policy allows.
        let order = [Stage::ControlPlane, Stage::Ccm, Stage::Nodes];
        assert_eq!(check_upgrade(&v("v1.36.4"), &v("v1.37.1"), &order, false), Ok(()));
    }

    #[test]
    fn a_pair_that_skips_a_minor_is_refused_even_as_a_negative_test() {
        for allow in [false, true] {
            let error = check_upgrade(&v("v1.35.2"), &v("v1.37.1"), REQUIRED, allow).unwrap_err();
            assert_eq!(
                error,
                SkewError::SkipsAMinor {
                    from: "v1.35.2".into(),
                    to: "v1.37.1".into(),
                    skipped: "1.36".into(),
                    next: "v1.36".into()
                }
            );
        }
    }

    #[test]
    fn the_ccm_two_minors_behind_is_the_rule_a_skipped_minor_would_break() {
        let mut minors = Minors::all_at(35);
        minors.set(Component::KubeApiserver, 37);
        minors.set(Component::KubeControllerManager, 36);
        minors.set(Component::KubeScheduler, 36);
        let (component, rule) = minors.violation().unwrap();
        assert_eq!(component, Component::CloudControllerManager);
        assert_eq!(rule, "cloud-controller-manager may be at most one minor older than kube-apiserver");
        // Kubelets may be three behind, not four.
        let mut minors = Minors::all_at(37);
        minors.set(Component::Kubelet, 34);
        assert_eq!(minors.violation(), None);
        minors.set(Component::Kubelet, 33);
        assert_eq!(minors.violation().unwrap().1, "kubelet may be at most 3 minors older than kube-apiserver");
    }

    #[test]
    fn a_downgrade_or_the_same_release_is_not_an_upgrade() {
        for (from, to) in [("v1.37.1", "v1.36.4"), ("v1.37.1", "v1.37.1"), ("v1.37.1", "v2.0.0")] {
            let error = check_upgrade(&v(from), &v(to), REQUIRED, true).unwrap_err();
            assert!(matches!(error, SkewError::NotNewer { .. }), "{from} → {to}: {error}");
        }
    }

    #[test]
    fn an_order_must_name_each_stage_once() {
        for order in [&[Stage::ControlPlane, Stage::Nodes][..], &[Stage::Nodes, Stage::Nodes, Stage::Ccm]] {
            let error = check_upgrade(&v("v1.36.4"), &v("v1.37.1"), order, false).unwrap_err();
            assert!(matches!(error, SkewError::NotEachStageOnce { .. }), "{error}");
        }
    }

    /// Every order of the three stages, against a naive oracle: an order is allowed exactly when
    /// the control plane comes before the CCM and before the nodes' kubelets would be newer than it.
    #[test]
    fn every_order_agrees_with_the_rule_that_the_control_plane_goes_first() {
        let stages = Stage::REQUIRED_ORDER;
        for a in stages {
            for b in stages {
                for c in stages {
                    let order = [a, b, c];
                    if !(a != b && b != c && a != c) {
                        continue;
                    }
                    let allowed = check_upgrade(&v("v1.36.4"), &v("v1.37.1"), &order, false).is_ok();
                    assert_eq!(allowed, a == Stage::ControlPlane, "{order:?}");
                }
            }
        }
    }
}
