//! The metrics endpoint (`--metrics-port`): a tiny HTTP/1.1 responder on its own thread that
//! serves `/metrics` (the OpenMetrics text format, through the `prometheus-client` crate:
//! [`families`]), `/healthz` (alive: it answered) and `/readyz` (`crate::health`: loaded and,
//! on a replica, synced).
//!
//! Scrapes are rare (every few seconds), so one thread answers them one at a time with
//! `Connection: close`; a client that does not send its request within [`READ_TIMEOUT`] is
//! dropped, and a request head larger than [`MAX_REQUEST`] is refused, so a stuck or hostile
//! peer costs a bounded wait and buffer. It never touches the event loops: what it shows is
//! read from the counters they publish.

pub mod families;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::shared::Shared;

/// How long a connection may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest request head read (a scraper sends a few hundred bytes).
const MAX_REQUEST: usize = 8 * 1024;

/// The OpenMetrics text format's content type (what `prometheus-client` writes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds `bind:port` and serves it on a thread until the server is gone. Returns the bound
/// address (port 0 binds a free port: tests).
pub fn start(shared: &Arc<Shared>, bind: &str, port: u16) -> std::io::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind((bind, port))?;
    let addr = listener.local_addr()?;
    let weak = Arc::downgrade(shared);
    std::thread::Builder::new()
        .name("cairn-metrics".into())
        .spawn(move || serve(listener, weak))?;
    Ok(addr)
}

fn serve(listener: TcpListener, shared: Weak<Shared>) {
    for stream in listener.incoming() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        match stream {
            Ok(stream) => {
                if let Err(e) = answer(stream, &shared) {
                    tracing::debug!("metrics endpoint: {e}");
                }
            }
            Err(e) => {
                tracing::warn!("metrics endpoint: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// A response: status line, content type, body.
struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

fn text(status: &'static str, body: impl Into<String>) -> Response {
    Response {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.into(),
    }
}

fn answer(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let response = loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break route(&head, shared);
        }
        if head.len() >= MAX_REQUEST {
            break text(
                "431 Request Header Fields Too Large",
                "request head too large\n",
            );
        }
        match stream.read(&mut chunk)? {
            0 => return Ok(()),
            n => head.extend_from_slice(&chunk[..n]),
        }
    };
    let head_only = head.starts_with(b"HEAD ");
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(response.body.as_bytes());
    }
    stream.write_all(&out)
}

/// The response to the request whose head is `head`.
fn route(head: &[u8], shared: &Shared) -> Response {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next());
    let Some(target) = target else {
        return text("400 Bad Request", "bad request line\n");
    };
    if method != b"GET" && method != b"HEAD" {
        return text("405 Method Not Allowed", "only GET and HEAD\n");
    }
    // The query string, if any, changes nothing.
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    match path {
        b"/metrics" => Response {
            status: "200 OK",
            content_type: CONTENT_TYPE,
            body: families::render(shared),
        },
        b"/healthz" => text("200 OK", "ok\n"),
        b"/readyz" => match shared.readiness.status() {
            Ok(()) => text("200 OK", "ready\n"),
            Err(why) => text("503 Service Unavailable", why.join("\n") + "\n"),
        },
        _ => text("404 Not Found", "try /metrics, /healthz or /readyz\n"),
    }
}
