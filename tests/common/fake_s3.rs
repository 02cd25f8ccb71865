//! An S3-compatible server for a test: `tools/testing/fake-s3` (johannesboyne/gofakes3, in memory)
//! on 127.0.0.1, a free port, plain HTTP, path-style, requests unauthenticated. The harness reaches
//! it through `StoreOptions { s3_endpoint: Some(endpoint()) }` (`AWS_ENDPOINT`); the helpers here
//! speak its S3 API over a bare HTTP/1.0 connection, so they work inside or outside a runtime and
//! show what is in a bucket independently of the `object_store` crate.

use super::emulator::Emulator;
use super::fake_gcs::encode;

/// A running server, killed when dropped.
pub struct FakeS3 {
    emulator: Emulator,
}

impl FakeS3 {
    /// Starts the server with these buckets and waits until it answers; panics saying why it did not.
    pub fn start(buckets: &[&str]) -> FakeS3 {
        // -port 0 binds a free port, printed on stdout. At level info gofakes3 logs each request it
        // serves (e.g. "complete multipart upload <bucket> <key> <id>"), which tests may look for.
        let mut args = vec!["-host", "127.0.0.1", "-port", "0", "-log-level", "info"];
        for bucket in buckets {
            args.extend(["-bucket", bucket]);
        }
        let s3 = FakeS3 { emulator: Emulator::start("fake-s3", &args) };
        s3.emulator.wait_until_answers("GET", "/");
        for bucket in buckets {
            match s3.request("HEAD", &format!("/{}", encode(bucket)), b"") {
                (200, _) => {}
                (status, _) => panic!("fake-s3 did not create bucket {bucket}: HEAD answered {status}\n{}", s3.log()),
            }
        }
        s3
    }

    /// `http://127.0.0.1:PORT`, the value for `StoreOptions::s3_endpoint` (`AWS_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        self.emulator.url()
    }

    /// What the server logged: a line per request served, and any warnings and errors.
    pub fn log(&self) -> String {
        self.emulator.log()
    }

    /// Writes an object (a plain PUT), as any S3 client would.
    pub fn upload(&self, bucket: &str, key: &str, bytes: impl AsRef<[u8]>) {
        let path = object_path(bucket, key);
        match self.request("PUT", &path, bytes.as_ref()) {
            (200, _) => {}
            (status, body) => panic!("PUT {path}: {status}: {}", String::from_utf8_lossy(&body)),
        }
    }

    /// An object's bytes, `None` if there is no such object.
    pub fn download(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let path = object_path(bucket, key);
        match self.request("GET", &path, b"") {
            (200, body) => Some(body),
            (404, _) => None,
            (status, body) => panic!("GET {path}: {status}: {}", String::from_utf8_lossy(&body)),
        }
    }

    /// An object's `Content-Type` as the server answers a HEAD request, `None` if there is no such
    /// object.
    pub fn content_type(&self, bucket: &str, key: &str) -> Option<String> {
        let path = object_path(bucket, key);
        let (status, head, _) = self
            .emulator
            .exchange("HEAD", &path, None, b"")
            .unwrap_or_else(|e| panic!("HEAD {}{path}: {e}\n{}", self.endpoint(), self.log()));
        match status {
            200 => head.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-type").then(|| value.trim().to_owned())
            }),
            404 => None,
            status => panic!("HEAD {path}: {status}"),
        }
    }

    /// The keys of the objects under `prefix` (ListObjectsV2, every page), sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut token = None::<String>;
        loop {
            let mut path = format!("/{}?list-type=2&prefix={}", encode(bucket), encode(prefix));
            if let Some(token) = &token {
                path.push_str(&format!("&continuation-token={}", encode(token)));
            }
            let body = match self.request("GET", &path, b"") {
                (200, body) => String::from_utf8(body).expect("a UTF-8 listing"),
                (status, body) => panic!("listing: GET {path}: {status}: {}", String::from_utf8_lossy(&body)),
            };
            keys.extend(elements(&body, "Key"));
            match (elements(&body, "IsTruncated").first().map(String::as_str), elements(&body, "NextContinuationToken"))
            {
                (Some("true"), next) if !next.is_empty() => token = next.into_iter().next(),
                _ => break,
            }
        }
        keys.sort();
        keys
    }

    /// One request; panics if the server cannot be reached.
    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        self.emulator.request(method, path, None, body)
    }
}

/// `/<bucket>/<key>`, each segment of the key percent-encoded.
fn object_path(bucket: &str, key: &str) -> String {
    let key: Vec<String> = key.split('/').map(encode).collect();
    format!("/{}/{}", encode(bucket), key.join("/"))
}

/// The text of every `<name>…</name>` element of an S3 XML answer, unescaped.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut found = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else { break };
        found.push(unescape(&after[..end]));
        rest = &after[end + close.len()..];
    }
    found
}

fn unescape(text: &str) -> String {
    [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&#34;", "\""), ("&apos;", "'"), ("&#39;", "'"), ("&amp;", "&")]
        .iter()
        .fold(text.to_owned(), |text, (entity, c)| text.replace(entity, c))
}
