//! `harness serve`: the long-running server, and the central service providers publish to. It
//! mounts the ingestion API (`POST /api/v1/builds`), the LKG API (`/api/v1/...`) and the dashboard,
//! with `/healthz`, `/readyz` and Prometheus `/metrics`.
//!
//! It listens at once: the LKG is loaded in the background, and until the first load is done the
//! LKG routes (API and page) answer 503 with `Retry-After` while every other page works. When the
//! index's generation changes (checked every `poll`) only the builds indexed since are read and
//! added ([`results::known_good::load_new`]); the LKG is loaded whole at least every `refresh` (commit
//! histories move on their own) and whenever adding would not give what a whole load gives. When a
//! load fails the last good answers are still served and the failure is counted. Each answer is recorded
//! with the generation it was computed from (`Index::record_lkg`, one replica at a time), so
//! replicas on one database agree on it. Every response is counted, timed, logged, gzipped when the
//! client accepts it, and carries an ETag.
//!
//! What the store holds and the index lacks (a replica died between writing a build and indexing
//! it) is indexed on start and every `reconcile_every` ([`reconcile`]). With `keep_results`, the
//! passed and skipped results of older builds are expired every hour ([`retention`]).
//!
//! On SIGINT or SIGTERM it stops accepting connections and lets the requests in flight finish, for
//! at most `shutdown_timeout`: then it exits anyway (a stalled upload never holds it up).

pub mod claims;
pub mod dashboard;
pub mod ingest;
mod metrics;
mod reconcile;
mod responses;
mod retention;
pub mod uploads;

use std::collections::BTreeMap;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::sync::watch;
use tower_http::compression::CompressionLayer;
use tracing::{info, warn};

use self::metrics::{Metrics, ResultLabel};
use crate::dashboard::IndexSource;
use config::ProvidersConfig;
use results::index::{Index, LkgRecorded};
use results::known_good::{LkgOptions, Loaded, Update};
use results::store::ResultStore;

/// How long a request waits for a database connection before it is answered 503.
const DATABASE_WAIT: Duration = Duration::from_secs(3);
/// An object `/readyz` asks the store about (it need not exist).
const READY_PROBE: &str = ".readyz";

pub struct ServeOptions {
    pub listen: SocketAddr,
    /// A full LKG reload at least this often.
    pub refresh: Duration,
    /// How often to check the index's generation (a reload when it moved).
    pub poll: Duration,
    /// What one upload to the ingestion API may hold.
    pub limits: upload::Limits,
    /// Uploads read at once (the rest wait): memory is bounded by this × the body limit.
    pub concurrent_uploads: usize,
    /// Of those, the most one provider's uploads may take.
    pub uploads_per_provider: usize,
    /// The longest an upload's body may take to arrive (and an upload may wait for a place).
    pub upload_read_timeout: Duration,
    /// After SIGINT or SIGTERM, the longest the requests in flight may take.
    pub shutdown_timeout: Duration,
    /// How often to index what the store holds and the index lacks (also on start; zero: only
    /// on start).
    pub reconcile_every: Duration,
    /// Expire the passed and skipped results of builds older than this ([`retention`]); `None`
    /// keeps every result.
    pub keep_results: Option<Duration>,
    pub config: ProvidersConfig,
    /// The SQL index the LKG and the dashboard read.
    pub database: String,
    /// Create a SQLite index that does not exist yet (else that is an error).
    pub migrate: bool,
    /// The object store the dashboard reads build logs and artifacts from.
    pub store: String,
    pub lkg: LkgOptions,
}

/// Serves until SIGINT or SIGTERM.
pub async fn serve(options: ServeOptions) -> Result<()> {
    let metrics = Arc::new(Metrics::new());
    let index = if options.migrate {
        Index::open_waiting(&options.database, DATABASE_WAIT).await?
    } else {
        Index::open_existing_waiting(&options.database, DATABASE_WAIT).await?
    };
    let store = ResultStore::open(&options.store)?;
    results::known_good::check_options(&options.config, &options.lkg)?;
    let config = Arc::new(options.config);
    let loader = LkgLoader {
        config: config.clone(),
        options: options.lkg,
        index: index.clone(),
        store: store.clone(),
        metrics: metrics.clone(),
    };
    // Served from the first load on; until then the LKG routes answer 503.
    let (snapshots, receiver) = watch::channel(None);

    let dashboard = IndexSource::new(index.clone(), store.clone(), receiver.clone(), repos(&config));
    let ingest = ingest::Ingest {
        index: index.clone(),
        store: store.clone(),
        config,
        limits: options.limits,
        metrics: metrics.clone(),
        uploads: uploads::Uploads::new(
            options.concurrent_uploads,
            options.uploads_per_provider,
            options.upload_read_timeout,
        ),
        read_timeout: options.upload_read_timeout,
        claims: claims::ClaimTimes::default(),
    };
    let refresher = tokio::spawn(refresh(loader, options.poll, options.refresh, snapshots));
    let reconciler = tokio::spawn(reconcile::run(
        store.clone(),
        index.clone(),
        options.reconcile_every,
        ingest.claims.lease,
        metrics.clone(),
    ));
    let expirer = options.keep_results.map(|keep| tokio::spawn(retention::run(index.clone(), keep, metrics.clone())));
    let app = router(receiver, metrics, Arc::new(dashboard), Arc::new(ingest));
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}: pass a free address with --listen", options.listen))?;
    let address = listener.local_addr()?;
    // Scripts and tests read the address from this line when they asked for port 0.
    println!("serving on http://{address}");
    info!("LKG API on http://{address}/api/v1/lkg, refreshed every {}", humantime::format_duration(options.refresh));
    let served = serve_until_stopped(listener, app, options.shutdown_timeout).await;
    refresher.abort();
    reconciler.abort();
    if let Some(expirer) = expirer {
        expirer.abort();
    }
    served
}

/// Serves until SIGINT or SIGTERM, then lets the requests in flight finish for at most `grace`.
async fn serve_until_stopped(listener: tokio::net::TcpListener, app: Router, grace: Duration) -> Result<()> {
    let (stopping, mut stopped) = watch::channel(false);
    let served = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown().await;
        let _ = stopping.send(true);
    });
    let deadline = async move {
        let _ = stopped.wait_for(|stopped| *stopped).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        served = served.into_future() => served.context("serving HTTP"),
        () = deadline => {
            warn!("requests still in flight {} after the signal (--shutdown-timeout): exiting", humantime::format_duration(grace));
            Ok(())
        }
    }
}

/// Each provider's repository (and Kubernetes'), for commit links.
fn repos(config: &ProvidersConfig) -> BTreeMap<String, String> {
    let mut repos: BTreeMap<String, String> =
        config.providers.iter().map(|provider| (provider.name.clone(), provider.repo.clone())).collect();
    repos.insert("kubernetes".into(), "https://github.com/kubernetes/kubernetes".into());
    repos
}

fn router(
    snapshots: lkg::api::Snapshots,
    metrics: Arc<Metrics>,
    dashboard: Arc<IndexSource>,
    ingest: Arc<ingest::Ingest>,
) -> Router {
    let observed = metrics.clone();
    let (index, ready, uploads) = (ingest.index.clone(), ingest.clone(), ingest.clone());
    lkg::api::router(snapshots)
        .merge(dashboards::web::router(dashboard))
        .merge(ingest::router(ingest))
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
        .route("/readyz", get(move || readyz(ready.clone())))
        .route(
            "/metrics",
            get(move || async move {
                metrics.uploads_in_flight.set(uploads.uploads.in_use() as i64);
                (
                    [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
                    metrics.encode(),
                )
            }),
        )
        .fallback(|| async {
            let message = format!(
                "no such endpoint: see {}, {}, POST {}, /healthz, /readyz, /metrics",
                dashboards::web::PATHS.join(", "),
                lkg::api::PATHS.join(", "),
                ingest::PATH
            );
            lkg::api::ApiError { status: StatusCode::NOT_FOUND, message }.into_response()
        })
        .layer(axum::middleware::from_fn(responses::validators))
        .layer(CompressionLayer::new())
        .layer(axum::middleware::from_fn_with_state(observed, responses::observe))
}

/// Ready to take publishes: the index answers, the object store can be reached, and an upload
/// place is free.
async fn readyz(ingest: Arc<ingest::Ingest>) -> (StatusCode, String) {
    let uploads = &ingest.uploads;
    if uploads.in_use() >= uploads.capacity() {
        let message =
            format!("not ready: uploads saturated ({} of {} places in use)", uploads.in_use(), uploads.capacity());
        return (StatusCode::SERVICE_UNAVAILABLE, message);
    }
    let store_reachable = ingest.store.size(READY_PROBE).await.map(|_| ());
    match (ingest.index.ping().await, store_reachable) {
        (Ok(()), Ok(())) => (StatusCode::OK, "ok".to_owned()),
        (Err(error), _) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {error}")),
        (_, Err(error)) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {error}")),
    }
}

/// Loads the LKG from the index and records it for the other replicas.
struct LkgLoader {
    config: Arc<ProvidersConfig>,
    options: LkgOptions,
    index: Index,
    /// Where each provider's LKG marker objects go.
    store: ResultStore,
    metrics: Arc<Metrics>,
}

impl LkgLoader {
    /// The LKG read whole from the index, and the index generation it is of.
    async fn full(&self) -> Result<(Loaded, i64)> {
        let started = Instant::now();
        let before = self.index.index_generation().await?;
        let loaded = results::known_good::load_full(&self.config, &self.options, &self.index).await?;
        info!(
            "LKG loaded whole in {:?}: {} build verdict(s), {} of them judged from their results now",
            started.elapsed(),
            loaded.verdicts_held(),
            loaded.judged()
        );
        self.loaded(before, &loaded.snapshot, "full", started).await;
        Ok((loaded, before))
    }

    /// Takes what was indexed since into `loaded` ([`results::known_good::load_new`]), and returns the index
    /// generation it is now of; `None` when only a full load will do (`loaded` is unchanged).
    async fn update(&self, loaded: &mut Loaded) -> Result<Option<(Update, i64)>> {
        let started = Instant::now();
        let before = self.index.index_generation().await?;
        let update = results::known_good::load_new(&self.config, &self.options, &self.index, loaded).await?;
        let kind = match &update {
            Update::Unchanged => "unchanged",
            Update::Added { builds } => {
                info!("LKG: {builds} new build(s) added in {:?}", started.elapsed());
                "incremental"
            }
            Update::Rebuilt { reason } => {
                info!("LKG rebuilt from the builds held in {:?}: {reason}", started.elapsed());
                "rebuilt"
            }
            Update::NeedsFull(reason) => {
                info!("loading the LKG whole again: {reason}");
                return Ok(None);
            }
        };
        self.loaded(before, &loaded.snapshot, kind, started).await;
        Ok(Some((update, before)))
    }

    /// Counts a load, and records its answer when it is exactly one generation's (a build indexed
    /// while the rows were read may or may not be in it). The caller sets the generation in
    /// `/metrics` once it serves the answer: a client that sees it there sees the answer, and its
    /// record.
    async fn loaded(&self, before: i64, snapshot: &lkg::api::Snapshot, kind: &'static str, started: Instant) {
        self.metrics.loaded(snapshot, kind, started.elapsed());
        if matches!(self.index.index_generation().await, Ok(after) if after == before) {
            self.record(before, snapshot).await;
        }
    }

    async fn record(&self, generation: i64, snapshot: &lkg::api::Snapshot) {
        // Every line's answer, without the load time: equal answers serialise equally.
        let views: BTreeMap<&String, lkg::api::LkgView> = snapshot
            .lines
            .keys()
            .filter_map(|line| lkg::api::lkg(snapshot, Some(line)).ok().map(|view| (line, view)))
            .map(|(line, view)| (line, lkg::api::LkgView { loaded_at: 0, ..view }))
            .collect();
        let report = serde_json::to_string(&views).expect("the LKG view serialises");
        let result = match self.index.record_lkg(generation, &report, results::unix_now()).await {
            Ok(LkgRecorded::Written) => {
                // The replica that records a generation first publishes its markers: one writer.
                if let Err(error) = results::known_good::export::publish_markers(&self.store, snapshot).await {
                    warn!("publishing the LKG markers to the store failed: {error:#}");
                }
                "written"
            }
            Ok(LkgRecorded::Same) => "same",
            Ok(LkgRecorded::Stale { .. }) => "stale",
            Ok(LkgRecorded::Conflict) => {
                warn!(
                    "the LKG recorded for index generation {generation} differs from this replica's: keeping the first"
                );
                "conflict"
            }
            Err(error) => {
                warn!("recording the LKG failed: {error}");
                "error"
            }
        };
        self.metrics.lkg_records.get_or_create(&ResultLabel { result }).inc();
    }
}

/// The LKG being served: what it was computed from, the index generation it is of, and when its
/// histories were last fetched.
struct Served {
    loaded: Loaded,
    generation: i64,
    rebuilt_at: Instant,
}

/// Loads the LKG, serves it, and keeps it current until aborted: every `poll`, what was indexed
/// since is taken in; at least every `every` the histories are fetched again. A failed load is
/// retried at the next poll, the last answers (or the 503 of the first load) served meanwhile.
async fn refresh(
    loader: LkgLoader,
    poll: Duration,
    every: Duration,
    snapshots: watch::Sender<Option<Arc<lkg::api::Snapshot>>>,
) {
    let mut served: Option<Served> = None;
    loop {
        if let Err(error) = refresh_once(&loader, &mut served, every, &snapshots).await {
            loader.metrics.refresh_failed();
            match served {
                None => warn!("loading the LKG failed; LKG routes answer 503 until it loads: {error:#}"),
                Some(_) => warn!("reloading the LKG failed; still serving the last answers: {error:#}"),
            }
        }
        tokio::time::sleep(poll).await;
    }
}

async fn refresh_once(
    loader: &LkgLoader,
    served: &mut Option<Served>,
    every: Duration,
    snapshots: &watch::Sender<Option<Arc<lkg::api::Snapshot>>>,
) -> Result<()> {
    if let Some(current) = served.as_mut() {
        let due = current.rebuilt_at.elapsed() >= every;
        if loader.index.index_generation().await? == current.generation && !due {
            return Ok(());
        }
        if due {
            current.loaded.mark_stale();
        }
        if let Some((update, generation)) = loader.update(&mut current.loaded).await? {
            if matches!(update, Update::Rebuilt { .. }) {
                current.rebuilt_at = Instant::now();
            }
            if update != Update::Unchanged {
                snapshots.send_replace(Some(current.loaded.snapshot.clone()));
            }
            current.generation = generation;
            loader.metrics.generation.set(generation);
            return Ok(());
        }
    }
    let (loaded, generation) = loader.full().await?;
    snapshots.send_replace(Some(loaded.snapshot.clone()));
    loader.metrics.generation.set(generation);
    *served = Some(Served { loaded, generation, rebuilt_at: Instant::now() });
    Ok(())
}

async fn shutdown() {
    let signal = cli_support::signals::until_signal().await;
    info!("{signal}: shutting down");
}
