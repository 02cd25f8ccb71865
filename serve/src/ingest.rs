//! `POST /api/v1/builds`: the ingestion API every provider's CI publishes through.
//!
//! A request carries a bearer token bound to one provider and a build as `multipart/form-data`
//! (the `upload` crate reads it under limits). The build is checked whole before anything is
//! written: the token is valid, the job and the build's metadata belong to the token's provider,
//! file names stay inside the build directory, JUnit files hold no entity declarations and do not
//! nest too deep. Then it is written to the object store in Prow's order and indexed from there
//! (`results::publish::publish_files`), so a failure writing the store indexes nothing.
//!
//! Who writes is decided in the database before anything is written, so replicas on one database
//! behave as one service. A new job belongs to the first provider that claims it
//! ([`Index::claim_job`]; the others get `403`). A build directory is claimed by one upload's
//! content at a time ([`super::claims`]): of two posts of one build with different content at the
//! same moment one wins and the other gets `409` (the stored build is wholly the winner's); the same
//! content posted again is a no-op answered `200` with the build. A post without `finished.json`
//! may be replaced by a later post (the build is then what that post says, nothing of the earlier
//! one left); a finished build never is. A build's identity is its directory: a presubmit
//! (`pr-logs/pull/…`) never touches the periodic build of the same id (`logs/…`).
//! Every outcome is logged (`target=harness::audit`) and counted in `/metrics`.
//!
//! Under attack and at scale: a body is read within `read_timeout` (a stalled or trickling upload
//! is answered `408` and gives its place back), each provider reads at most its share of the
//! upload places ([`super::uploads`]; a request that finds none in time is `503` with
//! `Retry-After`), and no answer carries a server path (the details go to the audit log).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;
use tracing::{info, warn};

use super::claims::{self, Acquired, ClaimTimes};
use super::metrics::Metrics;
use super::uploads::Uploads;
use config::ProvidersConfig;
use junit::{self, JunitError};
use results::index::{Claim, Index, Indexed};
use results::layout::{self, BuildLocation, FINISHED_JSON, Finished, STARTED_JSON, Started, Versions};
use results::publish::{self, PublishError};
use results::record::{ReadBuildOptions, TestStatus, Unfinished};
use results::store::{ResultStore, StoreError};
use results::unix_now;

pub use upload::PATH;

/// What the ingestion API needs; shared by every request.
pub struct Ingest {
    pub index: Index,
    pub store: ResultStore,
    pub config: Arc<ProvidersConfig>,
    pub limits: upload::Limits,
    pub metrics: Arc<Metrics>,
    /// Uploads read at once, per provider and in all: each may hold up to
    /// `limits.max_body_bytes` in memory.
    pub uploads: Uploads,
    /// The longest reading one upload's body may take.
    pub read_timeout: Duration,
    /// How long a build's claim lasts unrenewed, and how long an upload waits for another's.
    pub claims: ClaimTimes,
}

pub fn router(ingest: Arc<Ingest>) -> Router {
    Router::new().route(PATH, post(post_build)).with_state(ingest)
}

/// Why a publish was refused: the status, a short reason for metrics and the audit log, and a
/// message for the client.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    reason: &'static str,
    message: String,
    /// For the audit log only (it may name server paths).
    detail: Option<String>,
}

impl Refusal {
    fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Refusal { status, reason, message: message.into(), detail: None }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// A failing database or store: answered without the error (it names hosts and paths),
    /// which goes to the audit log.
    fn unavailable(what: &str, error: impl std::fmt::Display) -> Self {
        let mut refusal = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("{what}; nothing was indexed: retry later"),
        );
        refusal.detail = Some(error.to_string());
        refusal
    }

    /// Other content of the build is being written (its outcome decides this one's).
    fn being_written(job: &str, build: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "being_written",
            format!(
                "build {job}/{build} is being published by another upload with other content: retry later (once that one is finished, this one is a conflict)"
            ),
        )
    }

    fn busy(uploads: &Uploads) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "this provider's uploads hold all {} of its places (of {}): retry later",
                uploads.share(),
                uploads.capacity()
            ),
        )
    }
}

/// Who published what, as far as the request got: for the audit log.
#[derive(Debug, Default)]
struct Audit {
    provider: Option<String>,
    job: Option<String>,
    build: Option<String>,
}

async fn post_build(State(ingest): State<Arc<Ingest>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let mut audit = Audit::default();
    let outcome = accept(&ingest, &headers, body, &mut audit).await;
    let provider = audit.provider.as_deref().unwrap_or("");
    let (job, build) = (audit.job.as_deref().unwrap_or(""), audit.build.as_deref().unwrap_or(""));
    let took_ms = started.elapsed().as_millis() as u64;
    match outcome {
        Ok((status, reason, body)) => {
            ingest.metrics.publish(provider, reason);
            info!(target: "harness::audit", provider, job, build, outcome = reason, status = status.as_u16(), took_ms, "publish accepted");
            (status, axum::Json(body)).into_response()
        }
        Err(refusal) => {
            ingest.metrics.publish(provider, refusal.reason);
            let detail = refusal.detail.as_deref().unwrap_or("");
            warn!(target: "harness::audit", provider, job, build, outcome = refusal.reason, status = refusal.status.as_u16(), took_ms, reason = %refusal.message, detail, "publish rejected");
            let mut response = lkg::api::ApiError { status: refusal.status, message: refusal.message }.into_response();
            match refusal.reason {
                "unauthenticated" => {
                    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                }
                "busy" => {
                    let after = HeaderValue::from(ingest.uploads.wait().as_secs().max(1));
                    response.headers_mut().insert(header::RETRY_AFTER, after);
                }
                "being_written" => {
                    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_WRITTEN_SECS));
                }
                _ => {}
            }
            response
        }
    }
}

type Accepted = (StatusCode, &'static str, serde_json::Value);

/// `Retry-After` of an upload that found other content of its build being written.
const RETRY_WRITTEN_SECS: u64 = 5;

async fn accept(ingest: &Ingest, headers: &HeaderMap, body: Body, audit: &mut Audit) -> Result<Accepted, Refusal> {
    let provider = authenticate(ingest, headers).await?;
    audit.provider = Some(provider.clone());
    check_length(headers, &ingest.limits)?;
    // Bounds memory: later uploads wait here, each provider within its share.
    let _permit = ingest.uploads.acquire(&provider).await.ok_or_else(|| Refusal::busy(&ingest.uploads))?;
    let upload = read_upload(ingest, headers, body).await?;
    audit.job = Some(upload.job.clone());
    audit.build = Some(upload.build.clone());
    let location = match (upload.pull, &upload.org_repo) {
        (Some(pr), Some(org_repo)) => BuildLocation::presubmit(org_repo, pr, &upload.job, &upload.build),
        _ => BuildLocation::periodic(&upload.job, &upload.build),
    }
    .map_err(|e| Refusal::invalid(e.to_string()))?;
    let started = parse_json::<Started>(&upload, STARTED_JSON)?;
    let finished = parse_json::<Finished>(&upload, FINISHED_JSON)?;
    check_timestamps(started.as_ref(), finished.as_ref())?;
    let owned = authorize(ingest, &provider, &upload.job, started.as_ref(), finished.as_ref()).await?;
    check_junit(&upload, &ingest.limits)?;
    if !owned {
        claim_job(ingest, &provider, &upload.job).await?;
    }

    let (dir, digest) = (location.object_dir(), claims::digest(&upload.files));
    let claim = Claim { path: &dir, digest: &digest, finished: finished.is_some() };
    let acquired = claims::acquire(&ingest.index, &claim, ingest.claims)
        .await
        .map_err(|e| Refusal::unavailable("cannot claim the build", e))?;
    match acquired {
        Acquired::Write => write(ingest, &upload, &location, &claim).await,
        Acquired::Done => match indexed_at(ingest, &dir).await? {
            Some(existing) => Ok((StatusCode::OK, "exists", existing)),
            // Written, and no longer in the index: write (and index) it again.
            None => write(ingest, &upload, &location, &claim).await,
        },
        Acquired::Finished => published_before(ingest, &upload, &location).await,
        Acquired::Busy => Err(Refusal::being_written(&upload.job, &upload.build)),
    }
}

/// Whoever posts a build has seen its run end: no finished.json means it was killed.
fn posted_build_options() -> ReadBuildOptions {
    ReadBuildOptions { unfinished: Unfinished::Aborted, ..ReadBuildOptions::default() }
}

/// Writes the claimed build and indexes it, renewing the claim meanwhile; done, the claim says so.
/// A build the store holds finished already (published before claims were kept, or by a writer
/// that died before indexing it) is not written again: see [`published_before`]; its `409` gives
/// the claim up. A write that failed leaves the claim to expire: the same content may resume at
/// once, while other content waits for the lease (another upload of the same content may still be
/// writing under it).
async fn write(
    ingest: &Ingest,
    upload: &upload::Upload,
    location: &BuildLocation,
    claim: &Claim<'_>,
) -> Result<Accepted, Refusal> {
    let finished_there = ingest.store.size(&format!("{}/{FINISHED_JSON}", claim.path)).await;
    let outcome = match finished_there {
        Err(e) => Err(Refusal::unavailable("cannot read the object store", e)),
        Ok(Some(_)) => published_before(ingest, upload, location).await,
        Ok(None) => {
            let opts = posted_build_options();
            let work = publish::publish_files(&ingest.store, &ingest.index, &upload.files, location, &opts);
            let published = claims::hold(&ingest.index, claim, ingest.claims.lease, work).await;
            published.map(|published| accepted(&published)).map_err(publish_refusal)
        }
    };
    let settled = match &outcome {
        Ok(_) => ingest.index.finish_claim(claim, unix_now()).await.map(|_| ()),
        Err(refusal) if refusal.status == StatusCode::CONFLICT => ingest.index.release_claim(claim).await,
        Err(_) => Ok(()),
    };
    if let Err(error) = settled {
        // The claim expires on its own: then another upload takes it over.
        warn!(path = claim.path, "settling the claim on a build failed: {error}");
    }
    outcome
}

fn publish_refusal(error: PublishError) -> Refusal {
    match error {
        PublishError::Store(e @ StoreError::Unholdable { .. }) => Refusal::invalid(e.to_string()),
        PublishError::Store(e) => Refusal::unavailable("the object store refused the build", e),
        PublishError::Index(e) => Refusal::unavailable("the index could not take the build", e),
        e => Refusal::unavailable("publishing failed", e),
    }
}

fn accepted(published: &publish::Published) -> Accepted {
    let (status, reason) = match published.indexed {
        Indexed::Inserted | Indexed::Replaced => (StatusCode::CREATED, "created"),
        Indexed::Unchanged => (StatusCode::OK, "exists"),
    };
    (status, reason, published_body(published))
}

/// Gives a new job to the token's provider; `403` when another provider claimed it first (at the
/// same moment, on another replica, say).
async fn claim_job(ingest: &Ingest, provider: &str, job: &str) -> Result<(), Refusal> {
    let owner =
        ingest.index.claim_job(job, provider).await.map_err(|e| Refusal::unavailable("cannot claim the job", e))?;
    if owner != provider {
        return Err(Refusal::forbidden(format!(
            "job {job:?} belongs to provider {owner:?} (by its first build); this token publishes for {provider:?} only"
        )));
    }
    Ok(())
}

/// Reads the body within `read_timeout`: a stalled or trickling upload gives its place back.
async fn read_upload(ingest: &Ingest, headers: &HeaderMap, body: Body) -> Result<upload::Upload, Refusal> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let read = upload::read(content_type, body.into_data_stream(), &ingest.limits);
    match tokio::time::timeout(ingest.read_timeout, read).await {
        Ok(read) => read.map_err(|e| Refusal::new(status(e.status()), reason(e.status()), e.to_string())),
        Err(_) => Err(Refusal::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!(
                "the body did not arrive within {} (the server's --upload-read-timeout): send it again",
                humantime::format_duration(ingest.read_timeout)
            ),
        )),
    }
}

/// The provider of the request's bearer token.
async fn authenticate(ingest: &Ingest, headers: &HeaderMap) -> Result<String, Refusal> {
    let unauthenticated = |message: &str| Refusal::new(StatusCode::UNAUTHORIZED, "unauthenticated", message);
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(unauthenticated(
            "no token: send Authorization: Bearer <token> (harness publish --token; an operator makes one with harness token create --provider P)",
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(bearer_token)
        .ok_or_else(|| unauthenticated("Authorization is not `Bearer <token>`"))?;
    match results::tokens::authenticate(&ingest.index, token).await {
        Ok(Some(found)) => Ok(found.provider),
        Ok(None) => Err(unauthenticated("the token is unknown or revoked: ask the operator for a new one")),
        Err(e) => Err(Refusal::unavailable("cannot check the token", e)),
    }
}

/// The token of `Bearer <token>`; the scheme is case-insensitive (RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Refuses a body announced larger than the limit before reading any of it.
fn check_length(headers: &HeaderMap, limits: &upload::Limits) -> Result<(), Refusal> {
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    match length {
        Some(length) if length > limits.max_body_bytes => Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            upload::UploadError::TooLarge { limit: limits.max_body_bytes }.to_string(),
        )),
        _ => Ok(()),
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(upload: &upload::Upload, path: &str) -> Result<Option<T>, Refusal> {
    let Some(file) = upload.file(path) else { return Ok(None) };
    serde_json::from_slice(&file.bytes)
        .map(Some)
        .map_err(|e| Refusal::invalid(format!("{path}: not what TestGrid expects: {e}")))
}

/// Refuses times a reader cannot show (before 1970, after 9999).
fn check_timestamps(started: Option<&Started>, finished: Option<&Finished>) -> Result<(), Refusal> {
    let times = [(STARTED_JSON, started.map(|s| s.timestamp)), (FINISHED_JSON, finished.and_then(|f| f.timestamp))];
    for (file, timestamp) in times {
        if let Some(timestamp) = timestamp.filter(|t| !(0..=layout::MAX_TIMESTAMP).contains(t)) {
            return Err(Refusal::invalid(format!(
                "{file}: timestamp {timestamp} is not epoch seconds between 1970 and the end of 9999"
            )));
        }
    }
    Ok(())
}

/// A token publishes only its provider's builds: the job must not be another provider's (by
/// providers.yaml, by its name, or by what the index holds), and the build's metadata must name
/// the token's provider (so the build counts for it, and only for it). Whether the index gives
/// the job to the token's provider already (a job's provider never changes once given: no claim
/// is needed then).
async fn authorize(
    ingest: &Ingest,
    provider: &str,
    job: &str,
    started: Option<&Started>,
    finished: Option<&Finished>,
) -> Result<bool, Refusal> {
    let mut owners: Vec<(String, &str)> = Vec::new();
    if let Some(cell) = ingest.config.cell(job) {
        owners.push((cell.provider.name.clone(), "providers.yaml"));
    } else if let Some(named) = ingest.config.provider_of_job(job) {
        let by = if named.prow.jobs.iter().any(|j| j == job) { "providers.yaml's prow.jobs" } else { "its name" };
        owners.push((named.name.clone(), by));
    }
    let owned = match ingest.index.job_provider(job).await {
        Ok(Some(indexed)) => {
            owners.push((indexed, "its builds in the index"));
            true
        }
        Ok(None) => false,
        Err(e) => return Err(Refusal::unavailable("cannot look the job up", e)),
    };
    if let Some((owner, by)) = owners.iter().find(|(owner, _)| owner != provider) {
        return Err(Refusal::forbidden(format!(
            "job {job:?} belongs to provider {owner:?} (by {by}); this token publishes for {provider:?} only"
        )));
    }
    let named = finished
        .and_then(|f| Versions::from_metadata(&f.metadata).provider)
        .or_else(|| started.and_then(|s| Versions::from_metadata(&s.metadata).provider));
    match named {
        Some(named) if named == provider => Ok(owned),
        Some(named) => Err(Refusal::forbidden(format!(
            "the build names provider {named:?} in its metadata; this token publishes for {provider:?} only"
        ))),
        None => Err(Refusal::invalid(format!(
            "the build names no provider: put \"provider\": {provider:?} in finished.json's (or started.json's) metadata, as harness run does"
        ))),
    }
}

/// Refuses JUnit files that are dangerous to read (entity declarations, a bomb; too deep, too
/// large). A merely broken file (truncated by a killed run) is taken, and reported as a problem
/// of the build, as `harness publish` does.
fn check_junit(upload: &upload::Upload, limits: &upload::Limits) -> Result<(), Refusal> {
    let options = junit::ReadOptions { max_file_bytes: limits.max_file_bytes, ..junit::ReadOptions::default() };
    for file in &upload.files {
        if layout::junit_artifact(&format!("{}/{}", upload.build, file.path)).is_none() {
            continue;
        }
        match junit::read_bytes(&file.bytes, Path::new(&file.path), &options) {
            Err(e @ JunitError::TooLarge { .. }) => {
                return Err(Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", e.to_string()));
            }
            Err(e @ (JunitError::Doctype { .. } | JunitError::TooDeep { .. })) => {
                return Err(Refusal::invalid(e.to_string()));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The build at `location` was finished by another publish: the upload's files all there already
/// are a no-op answered with the build (indexed now if the index lacks it: its writer died in
/// between), other content is `409`.
async fn published_before(
    ingest: &Ingest,
    upload: &upload::Upload,
    location: &BuildLocation,
) -> Result<Accepted, Refusal> {
    let differing = publish::differing_files(&ingest.store, &upload.files, location)
        .await
        .map_err(|e| Refusal::unavailable("cannot read the published build", e))?;
    if !differing.is_empty() {
        return Err(Refusal::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "build {}/{} is published already with other content ({}): publish under a new build id",
                upload.job,
                upload.build,
                differing.join(", ")
            ),
        ));
    }
    if let Some(existing) = indexed_at(ingest, &location.object_dir()).await? {
        return Ok((StatusCode::OK, "exists", existing));
    }
    publish::index_stored(&ingest.store, &ingest.index, location, &posted_build_options())
        .await
        .map(|published| accepted(&published))
        .map_err(publish_refusal)
}

/// The build the index holds at `dir`, as the answer to a publish that changed nothing.
async fn indexed_at(ingest: &Ingest, dir: &str) -> Result<Option<serde_json::Value>, Refusal> {
    let existing = ingest.index.build_at(dir).await.map_err(|e| Refusal::unavailable("cannot look the build up", e))?;
    Ok(existing.map(|existing| {
        json!({
            "job": existing.job,
            "build": existing.build,
            "url": existing.artifacts_url,
            "state": existing.state.as_str(),
            "passed": existing.passed,
            "indexed": "unchanged",
        })
    }))
}

fn published_body(published: &publish::Published) -> serde_json::Value {
    let record = &published.record;
    let count = |status| record.results.iter().filter(|r| r.status == status).count();
    json!({
        "job": record.info.job,
        "build": record.info.build,
        "url": published.url,
        "state": record.info.state.as_str(),
        "passed": record.info.passed,
        "indexed": match published.indexed {
            Indexed::Inserted => "inserted",
            Indexed::Replaced => "replaced",
            Indexed::Unchanged => "unchanged",
        },
        "tests": {
            "pass": count(TestStatus::Pass),
            "fail": count(TestStatus::Fail),
            "flaky": count(TestStatus::Flaky),
            "known-failure": count(TestStatus::KnownFailure),
            "skip": count(TestStatus::Skip),
        },
        "problems": record.problems.iter().map(|p| json!({"file": p.file, "message": p.message})).collect::<Vec<_>>(),
    })
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST)
}

fn reason(code: u16) -> &'static str {
    match code {
        413 => "too_large",
        415 => "unsupported",
        _ => "invalid",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_describes_the_route_and_its_fields() {
        let document: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(include_str!("../../upload/openapi.yaml")).expect("upload/openapi.yaml is YAML");
        let paths: Vec<&str> = document["paths"].as_mapping().unwrap().keys().map(|k| k.as_str().unwrap()).collect();
        assert_eq!(paths, [PATH]);
        let schema = &document["paths"][PATH]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"];
        let mut fields: Vec<&str> =
            schema["properties"].as_mapping().unwrap().keys().map(|k| k.as_str().unwrap()).collect();
        fields.sort();
        let mut served = vec![upload::JOB, upload::BUILD, upload::PULL, upload::ORG_REPO, upload::FILE];
        served.sort();
        assert_eq!(fields, served);
        let responses = document["paths"][PATH]["post"]["responses"].as_mapping().unwrap();
        for status in ["200", "201", "400", "401", "403", "408", "409", "413", "415", "503"] {
            assert!(responses.contains_key(status), "{status} is not documented");
        }
    }

    #[test]
    fn a_job_name_belongs_to_the_provider_it_names_the_longest_match_winning() {
        let yaml = config::BUNDLED;
        let local = config::bundled_entry("local").unwrap();
        let text = format!(
            "{}\n{}\n",
            // The bundled file has `aws`.
            yaml.trim_end(),
            local.replacen("- name: local", "- name: aws-gov", 1).trim_end()
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("providers.yaml"), text).unwrap();
        let config = ProvidersConfig::load(dir.path().join("providers.yaml")).unwrap();
        assert_eq!(
            config.provider_named_by_job("ci-cloud-provider-aws-e2e").map(|p| p.name.clone()).as_deref(),
            Some("aws")
        );
        assert_eq!(
            config.provider_named_by_job("ci-cloud-provider-aws-gov-e2e").map(|p| p.name.clone()).as_deref(),
            Some("aws-gov")
        );
        assert_eq!(config.provider_named_by_job("ci-cloud-provider-awsx-e2e").map(|p| p.name.clone()), None);
        assert_eq!(config.provider_named_by_job("my-own-job").map(|p| p.name.clone()), None);
        // The name is carried whatever its case, and at the end of the job's name too.
        for job in [
            "ci-cloud-provider-AWS-e2e",
            "CI-Cloud-Provider-aws-e2e",
            "ci-cloud-provider-aws",
            "ci-cloud-provider-aws.v2",
        ] {
            assert_eq!(config.provider_named_by_job(job).map(|p| p.name.clone()).as_deref(), Some("aws"), "{job}");
        }
        assert_eq!(
            config.provider_named_by_job("ci-cloud-provider-AWS-GOV-e2e").map(|p| p.name.clone()).as_deref(),
            Some("aws-gov")
        );
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer chp_x", "bearer chp_x", "BEARER chp_x", "bEaReR  chp_x "] {
            assert_eq!(bearer_token(value), Some("chp_x"), "{value}");
        }
        for value in ["Basic chp_x", "Bearer", "Bearer ", "chp_x", "Bearerchp_x"] {
            assert_eq!(bearer_token(value), None, "{value}");
        }
    }
}
