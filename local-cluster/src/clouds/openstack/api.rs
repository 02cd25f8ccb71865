//! A small client of the OpenStack APIs the harness provisions with: a Keystone token scoped to a
//! project, and JSON requests to the endpoints of its catalog.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// An API call that failed: what was asked and what the service said.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {detail}")]
pub struct ApiError {
    pub what: String,
    pub detail: String,
    /// The HTTP status, when the service answered.
    pub status: Option<StatusCode>,
}

type Result<T> = std::result::Result<T, ApiError>;

/// Who logs in: a user of the `Default` domain, scoped to a project of it, at Keystone's v3 URL
/// (`http://…/v3`, as a CCM's `auth-url`).
#[derive(Debug, Clone)]
pub struct Credentials {
    pub auth_url: String,
    pub username: String,
    pub password: String,
    pub project: String,
}

/// A logged-in client.
#[derive(Debug, Clone)]
pub struct Session {
    http: reqwest::Client,
    token: String,
    /// The token's project.
    pub project_id: String,
    /// Catalog type → public URL, in the region the catalog lists first.
    catalog: Vec<(String, String)>,
}

fn err(what: &str, detail: impl std::fmt::Display) -> ApiError {
    ApiError { what: what.to_owned(), detail: detail.to_string(), status: None }
}

impl Session {
    /// Logs in with `credentials` (password authentication, project scope).
    pub async fn login(credentials: &Credentials) -> Result<Session> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .no_proxy()
            .build()
            .map_err(|e| err("building an HTTP client", e))?;
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": credentials.username, "domain": {"id": "default"}, "password": credentials.password}}},
            "scope": {"project": {"name": credentials.project, "domain": {"id": "default"}}}
        }});
        let what = format!("logging in to Keystone at {} as {}", credentials.auth_url, credentials.username);
        let url = format!("{}/auth/tokens", credentials.auth_url.trim_end_matches('/'));
        let response = http.post(&url).json(&body).send().await.map_err(|e| err(&what, e))?;
        let status = response.status();
        let token = response.headers().get("x-subject-token").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let text = response.text().await.map_err(|e| err(&what, e))?;
        let (Some(token), true) = (token, status.is_success()) else {
            return Err(ApiError { what, detail: format!("{status}: {}", short(&text)), status: Some(status) });
        };
        let reply: Value = serde_json::from_str(&text).map_err(|e| err(&what, e))?;
        let project_id = reply["token"]["project"]["id"].as_str().unwrap_or_default().to_owned();
        let catalog = public_endpoints(&reply["token"]["catalog"]);
        Ok(Session { http, token, project_id, catalog })
    }

    /// The public URL of catalog type `kind` (`compute`, `network`, `identity`, ...).
    pub fn endpoint(&self, kind: &str) -> Result<&str> {
        self.catalog.iter().find(|(k, _)| k == kind).map(|(_, url)| url.as_str()).ok_or_else(|| {
            let known: Vec<&str> = self.catalog.iter().map(|(k, _)| k.as_str()).collect();
            err(&format!("finding the {kind} endpoint"), format!("the catalog lists only: {}", known.join(", ")))
        })
    }

    /// `method` on `path` of the `kind` endpoint with a JSON `body`; the JSON answer (`null` when
    /// empty).
    pub async fn call(&self, what: &str, method: Method, kind: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let url = format!("{}{path}", self.endpoint(kind)?.trim_end_matches('/'));
        let mut request = self.http.request(method, &url).header("X-Auth-Token", &self.token);
        // Nova answers with the fields of this microversion (servers' `OS-EXT-*` attributes among them).
        if kind == "compute" {
            request = request.header("OpenStack-API-Version", "compute 2.79");
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        self.finish(what, request).await
    }

    /// PUT of raw bytes (an image's data).
    pub async fn upload(&self, what: &str, kind: &str, path: &str, data: Vec<u8>) -> Result<Value> {
        let url = format!("{}{path}", self.endpoint(kind)?.trim_end_matches('/'));
        let request = self
            .http
            .put(&url)
            .header("X-Auth-Token", &self.token)
            .header("Content-Type", "application/octet-stream")
            .body(data);
        self.finish(what, request).await
    }

    async fn finish(&self, what: &str, request: reqwest::RequestBuilder) -> Result<Value> {
        let response = request.send().await.map_err(|e| err(what, e))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| err(what, e))?;
        if !status.is_success() {
            return Err(ApiError {
                what: what.to_owned(),
                detail: format!("{status}: {}", short(&text)),
                status: Some(status),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| err(what, format!("not JSON ({e}): {}", short(&text))))
    }

    pub async fn get(&self, what: &str, kind: &str, path: &str) -> Result<Value> {
        self.call(what, Method::GET, kind, path, None).await
    }

    pub async fn post(&self, what: &str, kind: &str, path: &str, body: Value) -> Result<Value> {
        self.call(what, Method::POST, kind, path, Some(body)).await
    }

    pub async fn put(&self, what: &str, kind: &str, path: &str, body: Option<Value>) -> Result<Value> {
        self.call(what, Method::PUT, kind, path, body).await
    }

    pub async fn delete(&self, what: &str, kind: &str, path: &str) -> Result<Value> {
        self.call(what, Method::DELETE, kind, path, None).await
    }
}

/// `id` of the object `key` in `reply` (`{"network": {"id": ...}}`).
pub fn id_of(reply: &Value, key: &str, what: &str) -> Result<String> {
    reply[key]["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| err(what, format!("no {key}.id in the answer: {}", short(&reply.to_string()))))
}

/// Catalog type → public URL, from a token's catalog.
fn public_endpoints(catalog: &Value) -> Vec<(String, String)> {
    let mut endpoints = Vec::new();
    for service in catalog.as_array().into_iter().flatten() {
        let kind = service["type"].as_str().unwrap_or_default();
        let public = service["endpoints"].as_array().into_iter().flatten().find(|e| e["interface"] == "public");
        if let Some(url) = public.and_then(|e| e["url"].as_str()) {
            endpoints.push((kind.to_owned(), url.to_owned()));
        }
    }
    endpoints
}

/// The first 300 characters of an answer, for an error.
fn short(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_endpoint_of_each_service_is_taken_from_a_token_catalog() {
        let catalog = json!([
            {"type": "compute", "endpoints": [
                {"interface": "admin", "url": "http://a"}, {"interface": "public", "url": "http://p/v2.1"}]},
            {"type": "identity", "endpoints": [{"interface": "internal", "url": "http://i"}]},
        ]);
        assert_eq!(public_endpoints(&catalog), vec![("compute".to_owned(), "http://p/v2.1".to_owned())]);
    }

    #[test]
    fn an_answer_without_the_id_asked_for_is_an_error_that_shows_it() {
        let reply = json!({"network": {"name": "n"}});
        let error = id_of(&reply, "network", "creating the network").unwrap_err();
        assert!(error.to_string().contains("no network.id in the answer: {\"network\""), "{error}");
        assert_eq!(id_of(&json!({"port": {"id": "p1"}}), "port", "x").unwrap(), "p1");
    }
}
