//! The cloud's `/metrics`: requests per operation and status, and injected faults per operation and mode.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::encode`]'s output (OpenMetrics text, which Prometheus scrapes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    operation: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    operation: String,
    mode: String,
}

/// The cloud's counters and the registry that exposes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    faults: Family<FaultLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("local_cloud");
        let requests = Family::<RequestLabels, Counter>::default();
        let faults = Family::<FaultLabels, Counter>::default();
        registry.register("requests", "Cloud API requests by operation and HTTP status", requests.clone());
        registry.register("injected_faults", "Injected faults applied, by operation and mode", faults.clone());
        Metrics { registry, requests, faults }
    }
}

impl Metrics {
    /// Counts one answered cloud API request.
    pub fn record_request(&self, operation: &str, status: u16) {
        let labels = RequestLabels { operation: operation.to_owned(), status: status.to_string() };
        self.requests.get_or_create(&labels).inc();
    }

    /// Counts one applied fault.
    pub fn record_fault(&self, operation: &str, mode: &str) {
        let labels = FaultLabels { operation: operation.to_owned(), mode: mode.to_owned() };
        self.faults.get_or_create(&labels).inc();
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_per_operation_and_status() {
        let metrics = Metrics::default();
        metrics.record_request("create_route", 201);
        metrics.record_request("create_route", 201);
        metrics.record_request("create_route", 503);
        metrics.record_fault("create_route", "fail");

        let text = metrics.encode();

        assert!(text.contains(r#"local_cloud_requests_total{operation="create_route",status="201"} 2"#), "{text}");
        assert!(text.contains(r#"local_cloud_requests_total{operation="create_route",status="503"} 1"#), "{text}");
        assert!(text.contains(r#"local_cloud_injected_faults_total{operation="create_route",mode="fail"} 1"#));
    }
}
