//! `harness serve`: the long-running server. It mounts the LKG API (`/api/v1/...`), with
//! `/healthz` and Prometheus `/metrics`, and reloads the LKG from the SQL index every `refresh`;
//! when a reload fails the last good answers are still served and the failure is counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::ProvidersConfig;
use crate::lkg::LkgOptions;
use crate::results::index::Index;

pub struct ServeOptions {
    pub listen: SocketAddr,
    pub refresh: Duration,
    pub config: ProvidersConfig,
    /// The SQL index the LKG and the dashboard read.
    pub database: String,
    pub lkg: LkgOptions,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// What `/metrics` exports.
struct Metrics {
    registry: Registry,
    refreshes: Family<ResultLabel, Counter>,
    builds: Gauge<i64, AtomicI64>,
    loaded_at: Gauge<i64, AtomicI64>,
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("harness_lkg");
        let refreshes = Family::<ResultLabel, Counter>::default();
        registry.register("refreshes", "LKG reloads from the SQL index, by result (ok, error)", refreshes.clone());
        let builds = Gauge::<i64, AtomicI64>::default();
        registry.register("builds", "Builds the LKG answers are computed from", builds.clone());
        let loaded_at = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "loaded_timestamp_seconds",
            "When the answers served were loaded (unix time)",
            loaded_at.clone(),
        );
        Self { registry, refreshes, builds, loaded_at }
    }

    fn loaded(&self, snapshot: &lkg::api::Snapshot) {
        self.refreshes.get_or_create(&ResultLabel { result: "ok" }).inc();
        self.builds.set(snapshot.builds.len() as i64);
        self.loaded_at.set(snapshot.loaded_at);
    }

    fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        text
    }
}

/// Serves until SIGINT or SIGTERM.
pub async fn serve(options: ServeOptions) -> Result<()> {
    let metrics = Arc::new(Metrics::new());
    let index = Index::open(&options.database).await?;
    let first = crate::lkg::load(&options.config, &options.lkg, &index).await.context("loading the LKG to serve")?;
    metrics.loaded(&first);
    let (snapshots, receiver) = watch::channel(Arc::new(first));

    let refresher =
        tokio::spawn(refresh(options.config, options.lkg, index.clone(), options.refresh, snapshots, metrics.clone()));
    let app = router(receiver, metrics, index.clone())
        .merge(dashboards::web::router(Arc::new(crate::dashboard::IndexSource(index))));
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}: pass a free address with --listen", options.listen))?;
    let address = listener.local_addr()?;
    // Scripts and tests read the address from this line when they asked for port 0.
    println!("serving on http://{address}");
    info!("LKG API on http://{address}/api/v1/lkg, refreshed every {}", humantime::format_duration(options.refresh));
    let served = axum::serve(listener, app).with_graceful_shutdown(shutdown()).await;
    refresher.abort();
    served.context("serving HTTP")
}

fn router(snapshots: watch::Receiver<Arc<lkg::api::Snapshot>>, metrics: Arc<Metrics>, index: Index) -> Router {
    lkg::api::router(snapshots)
        .route(
            "/healthz",
            // Healthy while the SQL index answers: the dashboard reads it on every request.
            get(move || async move {
                match index.ping().await {
                    Ok(()) => (StatusCode::OK, "ok".to_owned()),
                    Err(error) => (StatusCode::SERVICE_UNAVAILABLE, format!("unhealthy: {error}")),
                }
            }),
        )
        .route(
            "/metrics",
            get(move || async move {
                (
                    [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
                    metrics.encode(),
                )
            }),
        )
        .fallback(|| async {
            let message =
                format!("no such endpoint: see /api/v1/lkg, {}, /healthz, /metrics", lkg::api::PATHS.join(", "));
            lkg::api::ApiError { status: StatusCode::NOT_FOUND, message }.into_response()
        })
}

async fn refresh(
    config: ProvidersConfig,
    options: LkgOptions,
    index: Index,
    every: Duration,
    snapshots: watch::Sender<Arc<lkg::api::Snapshot>>,
    metrics: Arc<Metrics>,
) {
    loop {
        tokio::time::sleep(every).await;
        match crate::lkg::load(&config, &options, &index).await {
            Ok(snapshot) => {
                metrics.loaded(&snapshot);
                snapshots.send_replace(Arc::new(snapshot));
            }
            Err(error) => {
                metrics.refreshes.get_or_create(&ResultLabel { result: "error" }).inc();
                warn!("reloading the LKG failed; still serving the last answers: {error:#}");
            }
        }
    }
}

async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut sigint), Ok(mut sigterm)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = sigint.recv() => {},
        _ = sigterm.recv() => {},
    }
    info!("shutting down");
}
