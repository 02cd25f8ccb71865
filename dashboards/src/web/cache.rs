//! Rendered pages kept until the index changes: a job's grid per query until the job's generation
//! changes, the failure clusters and the flakiest tests until the index's does. A page is then
//! rendered once per change, and served from memory (with an ETag) until the next.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::layout::error_page;

/// How many rendered pages a cache keeps (all are dropped when it is exceeded: simple, and a
/// dashboard's working set is a few jobs × a few filters).
const CACHED_PAGES: usize = 256;

/// A rendered page: what it was rendered from, its ETag, its type and body.
#[derive(Clone)]
pub struct Rendered {
    generation: i64,
    at: Instant,
    etag: Option<HeaderValue>,
    content_type: HeaderValue,
    body: Bytes,
}

/// Rendered pages by key (the page and its query, and whether JSON).
pub struct PageCache<K> {
    pages: Mutex<HashMap<K, Rendered>>,
    /// How long a page is kept at most even if the generation does not change (the failure
    /// clusters depend on the time: their window moves); `None`: as long as it does not.
    max_age: Option<Duration>,
}

impl<K> PageCache<K> {
    pub fn new(max_age: Option<Duration>) -> PageCache<K> {
        PageCache { pages: Mutex::default(), max_age }
    }
}

impl<K> Default for PageCache<K> {
    fn default() -> Self {
        PageCache::new(None)
    }
}

impl<K: Hash + Eq> PageCache<K> {
    /// The page as rendered at `generation`, if it was and is young enough.
    pub fn get(&self, key: &K, generation: i64) -> Option<Response> {
        let pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = |r: &&Rendered| r.generation == generation && self.max_age.is_none_or(|age| r.at.elapsed() < age);
        pages.get(key).filter(fresh).cloned().map(respond)
    }

    /// Keeps a rendered response (a success; anything else is answered as it is, not kept) and
    /// answers it.
    pub async fn keep(&self, key: K, generation: i64, response: Response) -> Response {
        if response.status() != StatusCode::OK {
            return response;
        }
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        let body = match axum::body::to_bytes(response.into_body(), usize::MAX).await {
            Ok(body) => body,
            Err(e) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, &format!("rendering the page: {e}")),
        };
        // The generation and the key make the tag, when they are all the page depends on; a page
        // that also depends on the time gets the tag the server makes of its body.
        let etag = self.max_age.is_none().then(|| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            key.hash(&mut hasher);
            HeaderValue::from_str(&format!("W/\"g{generation}-{:016x}\"", hasher.finish())).expect("ASCII")
        });
        let content_type = content_type.unwrap_or(HeaderValue::from_static("text/html; charset=utf-8"));
        let rendered = Rendered { generation, at: Instant::now(), etag, content_type, body };
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        if pages.len() >= CACHED_PAGES {
            pages.clear();
        }
        pages.insert(key, rendered.clone());
        respond(rendered)
    }
}

fn respond(rendered: Rendered) -> Response {
    let mut response = ([(header::CONTENT_TYPE, rendered.content_type)], rendered.body).into_response();
    if let Some(etag) = rendered.etag {
        response.headers_mut().insert(header::ETAG, etag);
    }
    response
}
