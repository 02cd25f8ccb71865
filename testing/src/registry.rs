//! An OCI registry for a test: Debian's `docker-registry` (CNCF Distribution, the registry
//! `docker push` was written against) on 127.0.0.1, a free port, plain HTTP, storing in a
//! directory of its own; with [`Registry::start_with_login`], only for one user (htpasswd, as
//! Distribution's own auth does it). It is killed when dropped, and its storage removed.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Debian's package's binary (`apt-get install docker-registry`; scripts/test installs it).
pub const BINARY: &str = "/usr/bin/docker-registry";

/// A running registry, killed when dropped.
pub struct Registry {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
    login: Option<(String, String)>,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry that anyone may push to; panics saying why it did not start.
    pub fn start() -> Registry {
        Registry::launch(None)
    }

    /// Starts a registry that takes pushes and pulls from `user` with `password` only.
    pub fn start_with_login(user: &str, password: &str) -> Registry {
        Registry::launch(Some((user.to_string(), password.to_string())))
    }

    fn launch(login: Option<(String, String)>) -> Registry {
        assert!(
            Path::new(BINARY).is_file(),
            "{BINARY} is missing: apt-get install docker-registry (scripts/test installs it)"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let auth = match &login {
            Some((user, password)) => {
                let hash = bcrypt::hash(password, 5).expect("bcrypt hashes a password");
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
                format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", htpasswd.display())
            }
            None => String::new(),
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n{auth}",
            dir.path().join("storage").display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let mut child = Command::new(BINARY)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {BINARY}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        crate::emulator::collect_lines(child.stdout.take().expect("piped"), &log);
        crate::emulator::collect_lines(child.stderr.take().expect("piped"), &log);
        let registry = Registry { child, port, log, login, _dir: dir };
        registry.wait_until_answers();
        registry
    }

    fn wait_until_answers(&self) {
        let started = Instant::now();
        loop {
            // Distribution answers /v2/ with 200, or 401 when it wants a login: either way it is up.
            match self.get("/v2/", &[]) {
                Ok((200 | 401, _, _)) => return,
                other if started.elapsed() > Duration::from_secs(30) => {
                    panic!("{BINARY} on port {} does not answer /v2/: {other:?}\n{}", self.port, self.log())
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The port it listens on, at 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`, the registry part of an image reference.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// What it logged.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The digest the registry gives `repository:tag`'s manifest (`Docker-Content-Digest`),
    /// `None` if it has no such tag; with the login, if it has one.
    pub fn manifest_digest(&self, repository: &str, tag: &str) -> Option<String> {
        let accept = "application/vnd.oci.image.manifest.v1+json";
        let (status, head, body) = self
            .get(&format!("/v2/{repository}/manifests/{tag}"), &[("Accept", accept)])
            .unwrap_or_else(|e| panic!("the registry on port {}: {e}", self.port));
        match status {
            200 => head.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("docker-content-digest").then(|| value.trim().to_string())
            }),
            404 => None,
            _ => panic!("GET manifest {repository}:{tag}: {status}: {}", String::from_utf8_lossy(&body)),
        }
    }

    /// Whether the registry has the blob `digest` in `repository` (HEAD, with the login).
    pub fn has_blob(&self, repository: &str, digest: &str) -> bool {
        let (status, _, _) = self
            .request("HEAD", &format!("/v2/{repository}/blobs/{digest}"), &[])
            .unwrap_or_else(|e| panic!("the registry on port {}: {e}", self.port));
        status == 200
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> std::io::Result<(u16, String, Vec<u8>)> {
        self.request("GET", path, headers)
    }

    /// One request, with the login if it has one.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> std::io::Result<(u16, String, Vec<u8>)> {
        let authorization = self.login.as_ref().map(|(user, password)| {
            use base64::Engine as _;
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
        });
        let mut headers = headers.to_vec();
        headers.extend(authorization.as_deref().map(|value| ("Authorization", value)));
        crate::emulator::exchange(&self.host(), method, path, &headers, b"")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
