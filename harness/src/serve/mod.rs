//! `harness serve`: the long-running server. It mounts the LKG API (`/api/v1/...`) and the
//! dashboard, with `/healthz` and Prometheus `/metrics`, and reloads the LKG from the SQL index
//! every `refresh`; when a reload fails the last good answers are still served and the failure is
//! counted. Every response is counted, timed, logged, gzipped when the client accepts it, and
//! carries an ETag.

mod http;
mod metrics;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::watch;
use tower_http::compression::CompressionLayer;
use tracing::{info, warn};

use self::metrics::{Metrics, ResultLabel};
use crate::config::ProvidersConfig;
use crate::dashboard::IndexSource;
use crate::lkg::LkgOptions;
use crate::results::index::Index;
use crate::results::store::ResultStore;

/// How long a request waits for a database connection before it is answered 503.
const DATABASE_WAIT: Duration = Duration::from_secs(3);

pub struct ServeOptions {
    pub listen: SocketAddr,
    pub refresh: Duration,
    pub config: ProvidersConfig,
    /// The SQL index the LKG and the dashboard read.
    pub database: String,
    /// The object store the dashboard reads build logs and artifacts from.
    pub store: String,
    pub lkg: LkgOptions,
}

/// Serves until SIGINT or SIGTERM.
pub async fn serve(options: ServeOptions) -> Result<()> {
    let metrics = Arc::new(Metrics::new());
    let index = Index::open_waiting(&options.database, DATABASE_WAIT).await?;
    let store = ResultStore::open(&options.store)?;
    let first = crate::lkg::load(&options.config, &options.lkg, &index).await.context("loading the LKG to serve")?;
    metrics.loaded(&first);
    let (snapshots, receiver) = watch::channel(Arc::new(first));

    let dashboard =
        IndexSource { index: index.clone(), store, snapshots: receiver.clone(), repos: repos(&options.config) };
    let refresher =
        tokio::spawn(refresh(options.config, options.lkg, index.clone(), options.refresh, snapshots, metrics.clone()));
    let app = router(receiver, metrics, index, Arc::new(dashboard));
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

/// Each provider's repository (and Kubernetes'), for commit links.
fn repos(config: &ProvidersConfig) -> BTreeMap<String, String> {
    let mut repos: BTreeMap<String, String> =
        config.providers.iter().map(|provider| (provider.name.clone(), provider.repo.clone())).collect();
    repos.insert("kubernetes".into(), "https://github.com/kubernetes/kubernetes".into());
    repos
}

fn router(
    snapshots: watch::Receiver<Arc<lkg::api::Snapshot>>,
    metrics: Arc<Metrics>,
    index: Index,
    dashboard: Arc<IndexSource>,
) -> Router {
    let observed = metrics.clone();
    lkg::api::router(snapshots)
        .merge(dashboards::web::router(dashboard))
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
            let message = format!(
                "no such endpoint: see {}, {}, /healthz, /metrics",
                dashboards::web::PATHS.join(", "),
                lkg::api::PATHS.join(", ")
            );
            lkg::api::ApiError { status: StatusCode::NOT_FOUND, message }.into_response()
        })
        .layer(axum::middleware::from_fn(http::validators))
        .layer(CompressionLayer::new())
        .layer(axum::middleware::from_fn_with_state(observed, http::observe))
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
