//! What `/metrics` exports: LKG reloads and records, publishes to the ingestion API (by provider
//! and outcome), builds indexed by reconciliation with the store, and HTTP requests (counts by
//! route and status, latency histograms by route).

use std::sync::atomic::AtomicI64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: String,
    /// The route's pattern (`/job/{job}`), never the raw path: bounded cardinality.
    pub route: String,
    pub status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PublishLabels {
    /// The token's provider; empty when the request had no valid token.
    pub provider: String,
    /// created, exists, or why it was refused (unauthenticated, forbidden, invalid, too_large,
    /// unsupported, conflict, unavailable, timeout: the body came too slowly, busy: no upload
    /// place within the wait, being_written: other content of the build was still being written
    /// after the wait).
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoadLabel {
    /// full, incremental, or unchanged.
    pub kind: &'static str,
}

pub struct Metrics {
    registry: Registry,
    pub refreshes: Family<ResultLabel, Counter>,
    load_duration: Family<LoadLabel, Histogram>,
    builds: Gauge<i64, AtomicI64>,
    loaded_at: Gauge<i64, AtomicI64>,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabel, Histogram>,
    publishes: Family<PublishLabels, Counter>,
    filter_rejects: Family<ReasonLabel, Counter>,
    pub uploads_in_flight: Gauge<i64, AtomicI64>,
    pub generation: Gauge<i64, AtomicI64>,
    pub lkg_records: Family<ResultLabel, Counter>,
    pub reconciled: Family<ResultLabel, Counter>,
    pub expired_results: Counter,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let lkg = registry.sub_registry_with_prefix("harness_lkg");
        let refreshes = Family::<ResultLabel, Counter>::default();
        lkg.register("refreshes", "LKG reloads from the SQL index, by result (ok, error)", refreshes.clone());
        // 1 ms .. ~33 s.
        let load_duration = Family::<LoadLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        });
        lkg.register(
            "load_duration_seconds",
            "Time to load the LKG from the SQL index, by kind (full: every build; incremental: the builds \
             indexed since; unchanged: nothing new)",
            load_duration.clone(),
        );
        let builds = Gauge::<i64, AtomicI64>::default();
        lkg.register("builds", "Builds the LKG answers are computed from", builds.clone());
        let loaded_at = Gauge::<i64, AtomicI64>::default();
        lkg.register("loaded_timestamp_seconds", "When the answers served were loaded (unix time)", loaded_at.clone());
        let generation = Gauge::<i64, AtomicI64>::default();
        lkg.register(
            "index_generation",
            "The index generation the answers served were computed from",
            generation.clone(),
        );
        let lkg_records = Family::<ResultLabel, Counter>::default();
        lkg.register(
            "records",
            "Answers recorded for replicas to agree on, by result (written, same, stale, conflict, error)",
            lkg_records.clone(),
        );
        let http = registry.sub_registry_with_prefix("harness_http");
        let requests = Family::<RequestLabels, Counter>::default();
        http.register("requests", "HTTP requests answered, by method, route and status", requests.clone());
        // 0.5 ms .. ~8 s.
        let latency = Family::<RouteLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 15))
        });
        http.register("request_duration_seconds", "Time to answer an HTTP request, by route", latency.clone());
        let publishes = Family::<PublishLabels, Counter>::default();
        registry.register(
            "harness_publishes",
            "Builds posted to the ingestion API, by the token's provider and outcome",
            publishes.clone(),
        );
        let uploads_in_flight = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "harness_uploads_in_flight",
            "Uploads to the ingestion API being read now (at most --concurrent-uploads)",
            uploads_in_flight.clone(),
        );
        let filter_rejects = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "harness_dashboard_filter_rejects",
            "Grid test filters refused, by reason (too_long, too_complex, invalid)",
            filter_rejects.clone(),
        );
        let reconciled = Family::<ResultLabel, Counter>::default();
        registry.register(
            "harness_reconciled_builds",
            "Builds the store held and the index lacked, indexed by serve's reconciliation, by result \
             (inserted, replaced, failed: unreadable; error: a pass that failed)",
            reconciled.clone(),
        );
        let expired_results = Counter::default();
        registry.register(
            "harness_expired_results",
            "Passed and skipped test results expired from the index (--keep-results)",
            expired_results.clone(),
        );
        Self {
            registry,
            refreshes,
            load_duration,
            builds,
            loaded_at,
            requests,
            latency,
            publishes,
            filter_rejects,
            uploads_in_flight,
            generation,
            lkg_records,
            reconciled,
            expired_results,
        }
    }

    pub fn filter_rejected(&self, reason: &'static str) {
        self.filter_rejects.get_or_create(&ReasonLabel { reason }).inc();
    }

    pub fn loaded(&self, snapshot: &lkg::api::Snapshot, kind: &'static str, took: Duration) {
        self.refreshes.get_or_create(&ResultLabel { result: "ok" }).inc();
        self.load_duration.get_or_create(&LoadLabel { kind }).observe(took.as_secs_f64());
        self.builds.set(snapshot.builds.len() as i64);
        self.loaded_at.set(snapshot.loaded_at);
    }

    pub fn refresh_failed(&self) {
        self.refreshes.get_or_create(&ResultLabel { result: "error" }).inc();
    }

    pub fn request(&self, method: &str, route: &str, status: u16, took: Duration) {
        let labels = RequestLabels { method: method.to_owned(), route: route.to_owned(), status };
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&RouteLabel { route: route.to_owned() }).observe(took.as_secs_f64());
    }

    pub fn publish(&self, provider: &str, outcome: &'static str) {
        self.publishes.get_or_create(&PublishLabels { provider: provider.to_owned(), outcome }).inc();
    }

    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        text
    }
}
