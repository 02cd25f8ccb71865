//! SIGTERM stops the reference CCM cleanly: the binary, pointed at a tiny API server on loopback
//! with no objects, starts its controllers, and on SIGTERM stops them and exits 0 instead of dying
//! of the signal.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const EMPTY_LIST: &str = r#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":"1"},"items":[]}"#;

/// An API server with no objects: every list is empty and every watch stays open with nothing to
/// say. Records each request line.
fn serve_nothing() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || answer(stream, &log));
        }
    });
    (port, seen)
}

/// Answers the requests of one connection until the client closes it.
fn answer(stream: TcpStream, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        seen.lock().unwrap().push(request_line.trim().to_owned());
        if request_line.contains("watch=true") {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            writer.write_all(head.as_bytes()).unwrap();
            // Holds the watch open until the client goes.
            let _ = reader.read_to_end(&mut Vec::new());
            return;
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{EMPTY_LIST}",
            EMPTY_LIST.len()
        );
        writer.write_all(response.as_bytes()).unwrap();
    }
}

fn kubeconfig(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    let config = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
         clusters: [{{name: test, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n\
         users: [{{name: test, user: {{}}}}]\n\
         contexts: [{{name: test, context: {{cluster: test, user: test}}}}]\n"
    );
    std::fs::write(&path, config).unwrap();
    path
}

/// A port nothing listens on (the OS's pick, released for the CCM to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The whole response to `GET path` on loopback `port`.
fn get(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Waits up to `timeout` for `done` to hold.
fn wait_for(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The CCM, killed if the test ends before it has.
struct KilledOnDrop(Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The child's stderr lines, as they come.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    lines
}

#[test]
fn sigterm_stops_the_controllers_and_exits_zero() {
    let (port, seen) = serve_nothing();
    let dir = tempfile::tempdir().unwrap();
    let cloud_config = dir.path().join("cloud.yaml");
    // Never called: with no nodes and no services the controllers have nothing to ask the cloud.
    std::fs::write(&cloud_config, "url: http://127.0.0.1:9\n").unwrap();
    let health_port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_reference-ccm"))
        .args(["--cloud-provider=local", "--leader-elect=false", "--bind-address=127.0.0.1"])
        .arg(format!("--secure-port={health_port}"))
        .arg(format!("--kubeconfig={}", kubeconfig(dir.path(), port).display()))
        .arg(format!("--cloud-config={}", cloud_config.display()))
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut child);
    let mut child = KilledOnDrop(child);
    let watching = |resource: &str| {
        let prefix = format!("GET /api/v1/{resource}?");
        seen.lock().unwrap().iter().filter(|r| r.starts_with(&prefix) && r.contains("watch=true")).count()
    };
    // cloud-node and service watch nodes, service watches services.
    wait_for(Duration::from_secs(60), "the controllers' watches", || {
        watching("nodes") >= 2 && watching("services") >= 1
    });
    assert!(get(health_port, "/healthz").starts_with("HTTP/1.1 200"), "the health server serves");

    kill(Pid::from_raw(child.0.id() as i32), Signal::SIGTERM).unwrap();

    wait_for(Duration::from_secs(30), "the CCM to exit", || child.0.try_wait().unwrap().is_some());
    let status = child.0.wait().unwrap();
    let log: Vec<String> = lines.iter().collect();
    assert!(status.success(), "{status}; stderr:\n{}", log.join("\n"));
    let said = |text: &str| log.iter().any(|line| line.contains(text));
    assert!(said("received SIGTERM, stopping controllers"), "{}", log.join("\n"));
    assert!(said("controllers stopped"), "{}", log.join("\n"));
}
