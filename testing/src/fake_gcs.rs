//! A GCS emulator for a test: `tools/testing/fake-gcs-server` (fsouza/fake-gcs-server plus the XML
//! API writes object_store uses) on 127.0.0.1, a free port, plain HTTP, in memory. Google's clients
//! and the harness reach it through `STORAGE_EMULATOR_HOST=<emulator_host()>`; the helpers here
//! speak its JSON API over a bare HTTP/1.0 connection, so they work inside or outside a runtime.

use crate::emulator::Emulator;

/// A running emulator, killed when dropped.
pub struct FakeGcs {
    emulator: Emulator,
}

impl FakeGcs {
    /// Starts the emulator and waits until it answers; panics saying why it did not.
    pub fn start() -> FakeGcs {
        // -port 0 binds a free port, printed on stdout; the public host (the Host its XML API
        // answers to, and the host of the URLs it returns) defaults to the bound address.
        FakeGcs::launch("0", &[])
    }

    /// Starts the emulator for clients that reach it at `ip` on its port (pods, at the hub's
    /// address through `cluster up --hub-port`): its XML API, which object_store writes through,
    /// answers only requests whose Host is its public host. The JSON API the helpers here speak
    /// still answers on 127.0.0.1.
    pub fn start_public_at(ip: &str) -> FakeGcs {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
        FakeGcs::launch(&port, &["-public-host", &format!("{ip}:{port}")])
    }

    fn launch(port: &str, extra: &[&str]) -> FakeGcs {
        let mut args = vec!["-scheme", "http", "-host", "127.0.0.1", "-port", port];
        args.extend_from_slice(extra);
        args.extend(["-backend", "memory", "-log-level", "warn"]);
        let emulator = Emulator::start("fake-gcs-server", &args);
        emulator.wait_until_answers("GET", "/storage/v1/b");
        FakeGcs { emulator }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        self.emulator.url()
    }

    /// `127.0.0.1:PORT`, the value for `STORAGE_EMULATOR_HOST`.
    pub fn emulator_host(&self) -> &str {
        self.emulator.host()
    }

    /// What the emulator logged (warnings and errors).
    pub fn log(&self) -> String {
        self.emulator.log()
    }

    pub fn create_bucket(&self, name: &str) {
        let body = serde_json::json!({ "name": name }).to_string();
        self.expect_ok("creating bucket", "POST", "/storage/v1/b", Some("application/json"), body.as_bytes());
    }

    /// Writes an object (JSON API media upload), as any GCS client would.
    pub fn upload(&self, bucket: &str, object: &str, bytes: impl AsRef<[u8]>) {
        let path = format!("/upload/storage/v1/b/{}/o?uploadType=media&name={}", encode(bucket), encode(object));
        let content_type = content_type(object);
        self.expect_ok(&format!("uploading gs://{bucket}/{object}"), "POST", &path, Some(content_type), bytes.as_ref());
    }

    /// An object's bytes, `None` if there is no such object.
    pub fn download(&self, bucket: &str, object: &str) -> Option<Vec<u8>> {
        let path = format!("/storage/v1/b/{}/o/{}?alt=media", encode(bucket), encode(object));
        match self.request("GET", &path, None, b"") {
            (200, body) => Some(body),
            (404, _) => None,
            (status, body) => panic!("GET {path}: {status}: {}", String::from_utf8_lossy(&body)),
        }
    }

    /// The names of the objects under `prefix`, sorted.
    pub fn list(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut page_token = String::new();
        loop {
            let mut path = format!("/storage/v1/b/{}/o?prefix={}", encode(bucket), encode(prefix));
            if !page_token.is_empty() {
                path.push_str(&format!("&pageToken={}", encode(&page_token)));
            }
            let body = self.expect_ok("listing", "GET", &path, None, b"");
            let listing: serde_json::Value = serde_json::from_slice(&body).expect("a JSON object listing");
            for item in listing["items"].as_array().into_iter().flatten() {
                names.push(item["name"].as_str().unwrap_or_default().to_string());
            }
            match listing["nextPageToken"].as_str() {
                Some(token) if !token.is_empty() => page_token = token.to_string(),
                _ => break,
            }
        }
        names.sort();
        names
    }

    fn expect_ok(&self, what: &str, method: &str, path: &str, content_type: Option<&str>, body: &[u8]) -> Vec<u8> {
        match self.request(method, path, content_type, body) {
            (200..=299, body) => body,
            (status, body) => panic!("{what}: {method} {path}: {status}: {}", String::from_utf8_lossy(&body)),
        }
    }

    /// One request; panics if the emulator cannot be reached.
    pub fn request(&self, method: &str, path: &str, content_type: Option<&str>, body: &[u8]) -> (u16, Vec<u8>) {
        self.emulator.request(method, path, content_type, body)
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn content_type(object: &str) -> &'static str {
    match object.rsplit('.').next() {
        Some("json") => "application/json",
        Some("xml") => "application/xml",
        Some("txt") | Some("log") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}
