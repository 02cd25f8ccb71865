//! Prometheus metrics of the controllers: reconciles, failures and reconcile durations per
//! controller, served at `/metrics`.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabel, Counter>,
    failures: Family<ControllerLabel, Counter>,
    durations: Family<ControllerLabel, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("cloud_controller_manager");
        let reconciles = Family::<ControllerLabel, Counter>::default();
        let failures = Family::<ControllerLabel, Counter>::default();
        let durations = Family::<ControllerLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        registry.register("reconciles", "Reconciles started, per controller", reconciles.clone());
        registry.register("reconcile_failures", "Reconciles that failed, per controller", failures.clone());
        registry.register("reconcile_duration_seconds", "Reconcile durations, per controller", durations.clone());
        Metrics { registry, reconciles, failures, durations }
    }
}

impl Metrics {
    /// Counts a reconcile of `controller`; its duration is recorded when the guard drops.
    pub fn reconcile(&self, controller: &str) -> ReconcileTimer<'_> {
        let label = ControllerLabel { controller: controller.into() };
        self.reconciles.get_or_create(&label).inc();
        ReconcileTimer { metrics: self, label, started: Instant::now() }
    }

    pub fn failed(&self, controller: &str) {
        self.failures.get_or_create(&ControllerLabel { controller: controller.into() }).inc();
    }

    /// Reconciles counted so far for `controller`.
    pub fn reconciles_of(&self, controller: &str) -> u64 {
        self.reconciles.get_or_create(&ControllerLabel { controller: controller.into() }).get()
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        text
    }
}

pub struct ReconcileTimer<'a> {
    metrics: &'a Metrics,
    label: ControllerLabel,
    started: Instant,
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.metrics.durations.get_or_create(&self.label).observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_and_failures_appear_in_the_exposition() {
        let metrics = Metrics::default();
        drop(metrics.reconcile("route"));
        drop(metrics.reconcile("route"));
        metrics.failed("route");
        let text = metrics.encode();
        assert!(text.contains("cloud_controller_manager_reconciles_total{controller=\"route\"} 2"), "{text}");
        assert!(text.contains("cloud_controller_manager_reconcile_failures_total{controller=\"route\"} 1"), "{text}");
        assert!(
            text.contains("cloud_controller_manager_reconcile_duration_seconds_count{controller=\"route\"} 2"),
            "{text}"
        );
        assert_eq!(metrics.reconciles_of("route"), 2);
    }
}
