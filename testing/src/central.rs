//! The central service in tests and benchmarks: `harness serve` replicas (real processes on
//! loopback) over one database and one store directory, with tokens made by `harness token create`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use results::index::Index;

/// The `harness` binary at `binary` (a test's `env!("CARGO_BIN_EXE_harness")`), its environment
/// cleared of what would change its defaults.
pub fn harness(binary: &Path) -> Command {
    let mut cmd = Command::new(binary);
    cmd.env("CI", "true").env_remove("RUST_LOG");
    for inherited in ["DATABASE_URL", "HARNESS_STORE", "HARNESS_CONFIG", "HARNESS_TOKEN", "HARNESS_REMOTE"] {
        cmd.env_remove(inherited);
    }
    cmd
}

/// providers.yaml with two copies of the bundled `local` provider, `alpha` and `beta`, and no
/// other provider (the LKG version set is theirs alone).
pub fn providers_yaml(dir: &Path) -> PathBuf {
    let bundled = config::BUNDLED;
    let header = &bundled[..bundled.find("\n  - name: ").expect("the bundled file lists providers") + 1];
    let local = config::bundled_entry("local").expect("the bundled file has `local`");
    let alpha = local.replacen("- name: local", "- name: alpha", 1);
    let beta = local.replacen("- name: local", "- name: beta", 1);
    let path = dir.join("providers.yaml");
    std::fs::write(&path, format!("{header}{}\n{}\n", alpha.trim_end(), beta.trim_end())).unwrap();
    path
}

/// The central service's pieces: a database, a store directory, providers.yaml.
pub struct Service {
    pub dir: tempfile::TempDir,
    pub database: String,
    pub config: PathBuf,
    binary: PathBuf,
}

impl Service {
    pub fn new(binary: &Path, database: String) -> Service {
        let dir = tempfile::tempdir().unwrap();
        let config = providers_yaml(dir.path());
        std::fs::create_dir_all(dir.path().join("store")).unwrap();
        Service { dir, database, config, binary: binary.to_path_buf() }
    }

    pub fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    pub fn token(&self, provider: &str) -> String {
        let output = harness(&self.binary)
            .args(["token", "create", "--provider", provider, "--description", "test CI", "--database", &self.database])
            .arg("--config")
            .arg(&self.config)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// A `harness serve` replica that has loaded its LKG, its stderr (the audit log) in
    /// `<dir>/<name>.log`.
    pub fn replica(&self, name: &str, extra: &[&str]) -> Replica {
        let replica = self.start(name, extra, &[]);
        wait_for_lkg(&replica.url);
        replica
    }

    /// A `harness serve` replica as soon as it listens (its LKG may still be loading), with these
    /// environment variables.
    pub fn start(&self, name: &str, extra: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Replica {
        let log = self.dir.path().join(format!("{name}.log"));
        let mut child = harness(&self.binary)
            .args(["serve", "--listen", "127.0.0.1:0", "--poll", "200ms", "--database", &self.database])
            .arg("--config")
            .arg(&self.config)
            .arg("--store")
            .arg(self.store())
            .args(extra)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut first).unwrap();
        let address = first.trim().strip_prefix("serving on ").unwrap_or_else(|| panic!("{first:?}")).to_owned();
        Replica { child, url: address, log }
    }

    /// Every file under the store, relative.
    pub fn stored_files(&self) -> Vec<String> {
        let mut files = Vec::new();
        walk(&self.store(), &self.store(), &mut files);
        files.sort();
        files
    }

    pub async fn index(&self) -> Index {
        Index::open(&self.database).await.unwrap()
    }
}

/// The status of `GET path` from the server at `address` (`host:port` or `http://host:port`).
pub fn status_of(address: &str, path: &str) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    let address = address.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    let status = String::from_utf8_lossy(&head[9..12]).parse().unwrap_or(0);
    Ok(status)
}

/// Waits until the `harness serve` at `address` has loaded its LKG (it listens before: its LKG
/// routes answer 503 until then), for at most two minutes.
pub fn wait_for_lkg(address: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        match status_of(address, "/api/v1/lkg") {
            Ok(503) | Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Ok(503) | Err(_) => panic!("harness serve at {address} did not load its LKG within two minutes"),
            Ok(_) => return,
        }
    }
}

fn walk(root: &Path, dir: &Path, files: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(root, &path, files);
        } else {
            files.push(path.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

pub struct Replica {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    log: PathBuf,
}

impl Replica {
    /// SIGKILL: requests in flight are cut.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits up to `within` for it to exit: its exit status, `None` if still running
    /// (it is killed then).
    pub fn terminate(&mut self, within: std::time::Duration) -> Option<std::process::ExitStatus> {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.kill();
        None
    }

    /// The audit lines of its log.
    pub fn audit_log(&self) -> String {
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .filter(|l| l.contains("harness::audit"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
            let _ = self.child.wait();
        }
    }
}
