//! A local emulator for a test: a Go tool of `tools/testing/` (built by [`go_tool`]) started on a
//! free port, which says `listening on http://HOST:PORT` on stdout once bound. What it writes to
//! stderr is kept as its log; requests go over a bare HTTP/1.0 connection, so they work inside or
//! outside a runtime. It is killed when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::go_tools::go_tool;

/// How long the emulator may take to say where it listens, and then to answer.
const STARTUP: Duration = Duration::from_secs(30);

/// A running emulator, killed when dropped.
pub struct Emulator {
    name: String,
    child: Child,
    host: String,
    log: Arc<Mutex<String>>,
}

impl Emulator {
    /// Starts `tools/testing/<tool>` with `args` and waits until it says where it listens; panics
    /// saying why it did not. Follow with [`Emulator::wait_until_answers`].
    pub fn start(tool: &str, args: &[&str]) -> Emulator {
        let bin = go_tool(tool);
        let mut child = Command::new(&bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));

        let log = Arc::new(Mutex::new(String::new()));
        collect_lines(child.stderr.take().expect("piped"), &log);
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("listening on http://") {
                    let _ = tx.send(addr.trim().to_string());
                }
            }
        });
        let host = match rx.recv_timeout(STARTUP) {
            Ok(host) => host,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
                panic!("{} did not say where it listens within {STARTUP:?} ({status}):\n{log}", bin.display());
            }
        };
        Emulator { name: tool.to_string(), child, host, log }
    }

    /// Polls with the probe request `method path` until it is answered 200; panics if it is not
    /// within 30s.
    pub fn wait_until_answers(&self, method: &str, path: &str) {
        let started = Instant::now();
        loop {
            match self.try_request(method, path, None, b"") {
                Ok((200, _)) => return,
                other if started.elapsed() > STARTUP => {
                    panic!("{} at {} does not answer {method} {path}: {other:?}\n{}", self.name, self.host, self.log())
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.host)
    }

    /// What the emulator wrote to stderr.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One request: the status and the body; panics if the emulator cannot be reached.
    pub fn request(&self, method: &str, path: &str, content_type: Option<&str>, body: &[u8]) -> (u16, Vec<u8>) {
        self.try_request(method, path, content_type, body)
            .unwrap_or_else(|e| panic!("{method} {}{path}: {e}\n{}", self.url(), self.log()))
    }

    /// One request: the status and the body.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> std::io::Result<(u16, Vec<u8>)> {
        self.exchange(method, path, content_type, body).map(|(status, _, body)| (status, body))
    }

    /// One request: the status, the response's header lines and its body.
    pub fn exchange(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> std::io::Result<(u16, String, Vec<u8>)> {
        let content_type: Vec<(&str, &str)> = content_type.map(|c| ("Content-Type", c)).into_iter().collect();
        exchange(&self.host, method, path, &content_type, body)
    }
}

/// Appends each line `stream` gives to `log`, on a thread of its own, until the stream ends.
pub(crate) fn collect_lines(stream: impl Read + Send + 'static, log: &Arc<Mutex<String>>) {
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let mut log = sink.lock().unwrap_or_else(|e| e.into_inner());
            log.push_str(&line);
            log.push('\n');
        }
    });
}

/// One HTTP/1.0 request to `host` (`127.0.0.1:PORT`): the status, the response's header lines and
/// its body. HTTP/1.0: the server closes the connection after the response and never chunks it.
pub(crate) fn exchange(
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, String, Vec<u8>)> {
    let mut stream = TcpStream::connect(host)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("response without a header end"))?;
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other("response without a status code"))?;
    Ok((status, head, response[split + 4..].to_vec()))
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
