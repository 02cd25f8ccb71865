//! Test helpers for the deployers: a fake API server, kubeconfigs pointing at it, and fake programs
//! on a `PATH` of their own.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::deploy::DeployError;
use config::KubernetesVersion;

/// A minimal Kubernetes API server on 127.0.0.1: `/version`, node, pod, event, service, daemonset
/// and deployment lists, and pod logs (which echo their query). Stops when dropped.
pub(crate) struct FakeApi {
    pub url: String,
    /// Whether it lists a node.
    pub with_nodes: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApi {
    pub(crate) async fn start() -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a local port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        let with_nodes = Arc::new(AtomicBool::new(true));
        let nodes = with_nodes.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, nodes.clone()));
            }
        });
        FakeApi { url, with_nodes, task }
    }

    /// Writes a kubeconfig for it, with context `fake-context`, to `path`.
    pub(crate) fn write_kubeconfig(&self, path: &Path) {
        write_kubeconfig(path, &self.url);
    }
}

/// A kubeconfig for the server at `url`, context `fake-context`.
pub(crate) fn write_kubeconfig(path: &Path, url: &str) {
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {url}
users:
- name: fake
  user: {{}}
contexts:
- name: fake-context
  context:
    cluster: fake
    user: fake
current-context: fake-context
"
    );
    std::fs::create_dir_all(path.parent().expect("a dir")).expect("a dir");
    std::fs::write(path, text).expect("a kubeconfig");
}

/// A URL nothing listens on.
pub(crate) async fn closed_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a local port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    drop(listener);
    url
}

async fn serve(stream: TcpStream, with_nodes: Arc<AtomicBool>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request).await.unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        let target = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let (status, content_type, body) = respond(&target, with_nodes.load(Ordering::SeqCst));
        let head =
            format!("HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n", body.len());
        if write.write_all(head.as_bytes()).await.is_err() || write.write_all(body.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn list(kind: &str, api_version: &str, items: &str) -> String {
    format!(
        r#"{{"apiVersion":"{api_version}","kind":"{kind}","metadata":{{"resourceVersion":"7"}},"items":[{items}]}}"#
    )
}

fn respond(target: &str, with_nodes: bool) -> (&'static str, &'static str, String) {
    const JSON: &str = "application/json";
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    const SYSTEM: &str = "/api/v1/namespaces/kube-system";
    match path {
        "/version" => (
            "200 OK",
            JSON,
            r#"{"major":"1","minor":"37","gitVersion":"v1.37.1","gitCommit":"0123abc","gitTreeState":"clean",
                "buildDate":"2026-01-01T00:00:00Z","goVersion":"go1.25.0","compiler":"gc","platform":"linux/amd64"}"#
                .to_owned(),
        ),
        "/api/v1/nodes" => {
            let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"fake-node-1"}}"#;
            ("200 OK", JSON, list("NodeList", "v1", if with_nodes { node } else { "" }))
        }
        p if p == format!("{SYSTEM}/pods") => {
            let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"fake-ccm-0","namespace":"kube-system"},
                "spec":{"containers":[{"name":"ccm"},{"name":"sidecar"}]},
                "status":{"containerStatuses":[
                    {"name":"ccm","ready":true,"restartCount":2,"image":"ccm:1","imageID":"sha256:1"},
                    {"name":"sidecar","ready":true,"restartCount":0,"image":"sidecar:1","imageID":"sha256:2"}]}}"#;
            ("200 OK", JSON, list("PodList", "v1", pod))
        }
        p if p.starts_with(&format!("{SYSTEM}/pods/")) && p.ends_with("/log") => {
            ("200 OK", "text/plain", format!("a log line of {p}?{query}\nanother line\n"))
        }
        p if p == format!("{SYSTEM}/events") => ("200 OK", JSON, list("EventList", "v1", "")),
        p if p == format!("{SYSTEM}/services") => ("200 OK", JSON, list("ServiceList", "v1", "")),
        "/apis/apps/v1/namespaces/kube-system/daemonsets" => ("200 OK", JSON, list("DaemonSetList", "apps/v1", "")),
        "/apis/apps/v1/namespaces/kube-system/deployments" => ("200 OK", JSON, list("DeploymentList", "apps/v1", "")),
        _ => (
            "404 Not Found",
            JSON,
            r#"{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404}"#.to_owned(),
        ),
    }
}

/// Writes an executable `#!/bin/sh` script `name` into `dir`.
pub(crate) fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    testing::write_executable(&path, &format!("#!/bin/sh\n{body}"));
    path
}

/// `dir` first, then the system's dirs (for the scripts' `cat`, `mkdir`, `sleep`).
pub(crate) fn search_path(dir: &Path) -> OsString {
    format!("{}:/usr/bin:/bin", dir.display()).into()
}

/// The invocations a fake program recorded: each a list of `key=value` lines, split on `---`.
pub(crate) fn recorded(record: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(record).unwrap_or_default();
    text.split("---\n").filter(|call| !call.is_empty()).map(|call| call.lines().map(str::to_owned).collect()).collect()
}

/// The `arg=` lines of a recorded invocation, as the argv.
pub(crate) fn argv(call: &[String]) -> Vec<String> {
    call.iter().filter_map(|line| line.strip_prefix("arg=")).map(str::to_owned).collect()
}

/// The `key=` line of a recorded invocation.
pub(crate) fn value(call: &[String], key: &str) -> Option<String> {
    call.iter().find_map(|line| line.strip_prefix(&format!("{key}=")).map(str::to_owned))
}

/// A shell snippet appending `---`, `pwd=`, the given variables and one `arg=` line per argument
/// to `record`.
pub(crate) fn record_snippet(record: &Path, variables: &[&str]) -> String {
    let mut snippet = "{ echo '---'; echo \"pwd=$(pwd)\"; ".to_owned();
    for variable in variables {
        snippet.push_str(&format!("echo \"{variable}=${variable}\"; "));
    }
    snippet.push_str(&format!("for a in \"$@\"; do echo \"arg=$a\"; done; }} >> '{}'\n", record.display()));
    snippet
}

pub(crate) fn version() -> KubernetesVersion {
    "v1.37.1".parse().expect("a version")
}

/// Whether process `pid` has gone (or is a zombie nobody reaped yet).
pub(crate) fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Whether process `pid` is [`gone`] within a few seconds (a signal is delivered asynchronously).
pub(crate) fn gone_soon(pid: i32) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !gone(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    gone(pid)
}

/// A temp dir for a deployer with fake programs: `bin/` (first on [`Sandbox::search_path`]),
/// `repo/` (the provider's checkout, where the programs run) and `record` (what they record).
pub(crate) struct Sandbox {
    dir: tempfile::TempDir,
    pub bin: PathBuf,
    pub record: PathBuf,
}

impl Sandbox {
    pub(crate) fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("a temp dir");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("a bin dir");
        std::fs::create_dir_all(dir.path().join("repo")).expect("a repo dir");
        let record = dir.path().join("record");
        Sandbox { dir, bin, record }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `bin/` first, then the system's dirs.
    pub(crate) fn search_path(&self) -> OsString {
        search_path(&self.bin)
    }

    /// A `PATH` of one empty dir: no program is found.
    pub(crate) fn empty_path(&self) -> OsString {
        let empty = self.path().join("empty-bin");
        std::fs::create_dir_all(&empty).expect("an empty dir");
        empty.into_os_string()
    }

    /// A fake API server and, at `fake-kubeconfig`, a kubeconfig for it (for a fake program to copy).
    pub(crate) async fn fake_cluster(&self) -> (FakeApi, PathBuf) {
        let api = FakeApi::start().await;
        let kubeconfig = self.path().join("fake-kubeconfig");
        api.write_kubeconfig(&kubeconfig);
        (api, kubeconfig)
    }

    /// A kubeconfig at `fake-kubeconfig` for a server that does not answer.
    pub(crate) async fn dead_cluster(&self) -> PathBuf {
        let kubeconfig = self.path().join("fake-kubeconfig");
        write_kubeconfig(&kubeconfig, &closed_url().await);
        kubeconfig
    }

    /// `bin/<name>`: records each call (its dir, `variables` and argv) into `record`, then runs
    /// `body`.
    pub(crate) fn fake_program(&self, name: &str, variables: &[&str], body: &str) {
        write_script(&self.bin, name, &format!("{}{body}", record_snippet(&self.record, variables)));
    }

    /// The calls the fake programs recorded.
    pub(crate) fn calls(&self) -> Vec<Vec<String>> {
        recorded(&self.record)
    }

    /// The argv of the last recorded call.
    pub(crate) fn last_argv(&self) -> Vec<String> {
        argv(self.calls().last().expect("a recorded call"))
    }
}

/// Asserts that `result` is [`DeployError::MissingProgram`] for `program`, with a hint that holds
/// `install`.
pub(crate) fn assert_missing<T: std::fmt::Debug>(result: Result<T, DeployError>, program: &str, install: &str) {
    match result {
        Err(DeployError::MissingProgram { program: missing, hint }) => {
            assert_eq!(missing, program);
            assert!(hint.contains(install), "{hint}");
        }
        other => panic!("expected MissingProgram, got {other:?}"),
    }
}

/// Asserts that the first line of `error` starts with `start` and holds each of `first_line`, and
/// that the program's `output` is quoted after it.
pub(crate) fn assert_failed_run(error: DeployError, start: &str, first_line: &[&str], output: &str) {
    let error = error.to_string();
    let first = error.lines().next().expect("a message");
    assert!(first.starts_with(start), "{error}");
    for part in first_line {
        assert!(first.contains(part), "{part}: {error}");
    }
    assert!(error.lines().skip(1).any(|line| line.contains(output)), "the output is quoted: {error}");
}
