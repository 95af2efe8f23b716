//! MONITOR: the clients that watch every command, the line each command shows as (Redis's
//! format), what is hidden or redacted, and what a monitoring connection may still run.
//!
//! A command's line is made once and posted to each monitor's mailbox as a pushed message, so
//! it reaches the monitor through its own I/O thread and counts against the pubsub class of
//! `client-output-buffer-limit`, like a subscriber's messages. A monitor that does not read is
//! cut there; one whose thread is slow to take its mail is cut when its mailbox passes the
//! same limit. Either way the client that ran the command never waits for a monitor.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::RwLock;

use crate::clients::ClientInfo;
use crate::config::OutputLimits;

/// Mailbox bytes a monitor may have waiting when the pubsub class has no limit at all.
const UNLIMITED_CLASS_MAILBOX: usize = 1 << 30;

/// The monitoring clients.
#[derive(Default)]
pub struct Monitors {
    /// How many there are: the one load a command pays when there are none.
    count: AtomicUsize,
    list: RwLock<Vec<Arc<ClientInfo>>>,
}

impl Monitors {
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Relaxed) != 0
    }

    pub fn add(&self, client: Arc<ClientInfo>) {
        let mut list = self.list.write();
        if !list.iter().any(|c| c.id == client.id) {
            list.push(client);
            self.count.store(list.len(), Relaxed);
        }
    }

    pub fn remove(&self, id: u64) {
        let mut list = self.list.write();
        list.retain(|c| c.id != id);
        self.count.store(list.len(), Relaxed);
    }

    /// Shows `args`, run by `client`, to every monitor.
    /// `limits`: the output-buffer limits in force (a monitor is of the pubsub class);
    /// `disconnections` counts the monitors cut (INFO `client_output_limit_disconnections`).
    pub fn feed(
        &self,
        limits: &OutputLimits,
        disconnections: &AtomicU64,
        client: &ClientInfo,
        args: &[&[u8]],
    ) {
        let mut text = Vec::with_capacity(64);
        line(&mut text, unix_micros(), client, args);
        let limit = mailbox_limit(limits);
        let mut over = Vec::new();
        for monitor in self.list.read().iter() {
            if monitor.closed() || monitor.killed() {
                over.push(monitor.id);
            } else if monitor.post(&text, false) > limit {
                // Its thread is not taking its mail: cut it as its output limit would.
                tracing::warn!(
                    client = monitor.id,
                    addr = %monitor.addr,
                    "monitor closed for overcoming its output buffer limit"
                );
                disconnections.fetch_add(1, Relaxed);
                monitor.kill();
                over.push(monitor.id);
            }
        }
        for id in over {
            self.remove(id);
        }
    }
}

/// The most bytes a monitor's mailbox may hold: the pubsub class's hard limit (else its soft
/// one), as its output buffer would.
fn mailbox_limit(limits: &OutputLimits) -> usize {
    match (limits.pubsub.hard, limits.pubsub.soft) {
        (0, 0) => UNLIMITED_CLASS_MAILBOX,
        (0, soft) => soft as usize,
        (hard, _) => hard as usize,
    }
}

pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One monitor line, as Redis's `replicationFeedMonitors` writes it:
/// `+<secs>.<micros> [0 <peer>] "arg" "arg"...\r\n`, unix-socket clients as `unix:<path>`.
pub fn line(out: &mut Vec<u8>, unix_micros: u64, client: &ClientInfo, args: &[&[u8]]) {
    use std::io::Write as _;
    let _ = write!(
        out,
        "+{}.{:06} [0 ",
        unix_micros / 1_000_000,
        unix_micros % 1_000_000
    );
    match client
        .laddr
        .strip_suffix(":0")
        .filter(|p| p.starts_with('/'))
    {
        Some(path) => {
            out.extend_from_slice(b"unix:");
            out.extend_from_slice(path.as_bytes());
        }
        None => out.extend_from_slice(client.addr.as_bytes()),
    }
    out.extend_from_slice(b"] ");
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        quoted(out, arg);
    }
    out.extend_from_slice(b"\r\n");
}

/// `arg` in double quotes, escaped as Redis's `sdscatrepr`: `\\`, `\"`, `\n`, `\r`, `\t`, `\a`,
/// `\b`, printable ASCII as is, any other byte as `\xHH`.
pub fn quoted(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'x',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 15) as usize],
                ]);
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Protocol;

    fn client(addr: &str, laddr: &str) -> ClientInfo {
        ClientInfo::new(1, addr.into(), laddr.into(), 3, Protocol::Resp, None)
    }

    #[test]
    fn lines_escape_like_sdscatrepr() {
        let c = client("127.0.0.1:5555", "127.0.0.1:6380");
        let mut out = Vec::new();
        let args: [&[u8]; 3] = [b"set", b"k", b"a\"b\\c\n\r\t\x07\x08\x00\x7f\xc3\xa9 ~"];
        line(&mut out, 1_700_000_000_012_345, &c, &args);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "+1700000000.012345 [0 127.0.0.1:5555] \"set\" \"k\" \
             \"a\\\"b\\\\c\\n\\r\\t\\a\\b\\x00\\x7f\\xc3\\xa9 ~\"\r\n"
        );
        let unix = client("/tmp/c.sock:0", "/tmp/c.sock:0");
        let mut out = Vec::new();
        line(&mut out, 5, &unix, &[b"ping"]);
        assert_eq!(out, b"+0.000005 [0 unix:/tmp/c.sock] \"ping\"\r\n");
        let mut out = Vec::new();
        line(&mut out, 5, &unix, &[b""]);
        assert_eq!(out, b"+0.000005 [0 unix:/tmp/c.sock] \"\"\r\n");
    }
}
