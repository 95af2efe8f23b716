//! MONITOR: the clients that watch every command, the line each command shows as (Redis's
//! format), what is hidden or redacted, and what a monitoring connection may still run.
//!
//! A command's line is made once and posted to each monitor's mailbox as a pushed message, so
//! it reaches the monitor through its own I/O thread and counts against the pubsub class of
//! `client-output-buffer-limit`, like a subscriber's messages. A monitor that does not read is
//! cut there; one whose thread is slow to take its mail is cut when its mailbox passes the
//! same limit. Either way the client that ran the command never waits for a monitor.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::RwLock;

use crate::clients::{client_flags, ClientInfo};
use crate::command::{flags, Command, Ctx};
use crate::shared::Shared;

use super::REDACTED;

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
    pub fn feed(&self, shared: &Shared, client: &ClientInfo, args: &[&[u8]]) {
        let mut text = Vec::with_capacity(64);
        line(&mut text, unix_micros(), client, args);
        let limit = mailbox_limit(shared);
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
                shared
                    .stats
                    .client_output_limit_disconnections
                    .fetch_add(1, Relaxed);
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
fn mailbox_limit(shared: &Shared) -> usize {
    let limits = shared.settings.output_limits.read();
    match (limits.pubsub.hard, limits.pubsub.soft) {
        (0, 0) => UNLIMITED_CLASS_MAILBOX,
        (0, soft) => soft as usize,
        (hard, _) => hard as usize,
    }
}

fn unix_micros() -> u64 {
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

/// Whether monitors do not see `command` at all: administrative commands (Redis's ADMIN flag:
/// CONFIG, MONITOR, SLOWLOG, LATENCY, and CLIENT's KILL, LIST, PAUSE, UNPAUSE, NO-EVICT,
/// UNBLOCK), which may show secrets or are too frequent to be of interest.
pub fn hidden(command: &Command, subcommand: Option<&[u8]>) -> bool {
    if command.has(flags::ADMIN) {
        return true;
    }
    command.name == "client"
        && subcommand.is_some_and(|sub| {
            ["kill", "list", "pause", "unpause", "no-evict", "unblock"]
                .iter()
                .any(|s| sub.eq_ignore_ascii_case(s.as_bytes()))
        })
}

/// The arguments as monitors and the slow log show them: secrets replaced by `(redacted)`, as
/// Redis's `redactClientCommandArgument` does for AUTH, HELLO ... AUTH and CONFIG SET
/// requirepass.
pub fn redacted<'a>(command: &Command, args: impl Iterator<Item = &'a [u8]>) -> Vec<&'a [u8]> {
    let mut args: Vec<&[u8]> = args.collect();
    match command.name {
        // AUTH [user] password; with more arguments it fails before redacting, as in Redis.
        "auth" if args.len() <= 3 => {
            for arg in args.iter_mut().skip(1) {
                *arg = REDACTED;
            }
        }
        // HELLO [protover [AUTH user password] [SETNAME name]]: options until the first bad one.
        "hello" => {
            let mut j = 2;
            while j < args.len() {
                let more = args.len() - 1 - j;
                if args[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                    args[j + 1] = REDACTED;
                    args[j + 2] = REDACTED;
                    j += 3;
                } else if args[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                    j += 2;
                } else {
                    break;
                }
            }
        }
        "config" if args.len() > 1 && args[1].eq_ignore_ascii_case(b"set") => {
            for j in (2..args.len().saturating_sub(1)).step_by(2) {
                if args[j].eq_ignore_ascii_case(b"requirepass") {
                    args[j + 1] = REDACTED;
                }
            }
        }
        _ => {}
    }
    args
}

/// Whether a monitoring client may not run `command`: like a Redis replica, it may not touch
/// the keyspace (reads, writes, PUBLISH).
pub fn refuses(command: &Command) -> bool {
    command.has(flags::READONLY | flags::WRITE) || command.name == "publish"
}

/// The error a monitoring client gets for a command that touches the keyspace.
pub const REFUSED: &[u8] = b"ERR Replica can't interact with the keyspace";

/// MONITOR: from now on, this connection receives a line for every command run.
pub fn command(ctx: &mut Ctx<'_, '_>) {
    if matches!(ctx.db, store::Db::Locked(_)) {
        // Inside EXEC, where Redis denies commands that would block the client.
        return ctx.err(b"ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    if ctx.conn.monitor {
        // Already monitoring: ignored, as Redis does (no reply).
        return;
    }
    ctx.conn.monitor = true;
    let client = ctx.conn.client.clone();
    client.state.flags.fetch_or(client_flags::MONITOR, Relaxed);
    ctx.shared.observe.monitors.add(client);
    ctx.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{lookup, Args};
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

    #[test]
    fn a_monitor_whose_mail_piles_up_is_cut_at_the_pubsub_limit() {
        let shared = Shared::new(crate::config::Config::default());
        *shared.settings.output_limits.write() =
            crate::config::OutputLimits::parse("pubsub 1000 0 0").unwrap();
        // A monitor whose thread never takes its mail (no connection behind it).
        let monitor = Arc::new(ClientInfo::detached(7, Protocol::Resp));
        let monitors = &shared.observe.monitors;
        monitors.add(monitor.clone());
        assert!(monitors.active());
        let writer = client("127.0.0.1:5555", "127.0.0.1:6380");
        let value = [b'v'; 50];
        let args: [&[u8]; 3] = [b"set", b"k", &value];
        let mut one = Vec::new();
        line(&mut one, unix_micros(), &writer, &args);
        assert_eq!(one.len(), 102);
        for _ in 0..9 {
            monitors.feed(&shared, &writer, &args);
        }
        assert!(
            monitors.active() && !monitor.killed(),
            "918 bytes: under the limit"
        );
        monitors.feed(&shared, &writer, &args);
        assert!(monitor.killed(), "1020 bytes: over it");
        assert!(!monitors.active());
        let cut = &shared.stats.client_output_limit_disconnections;
        assert_eq!(cut.load(Relaxed), 1);
        // Nothing more is posted to it.
        assert_eq!(monitor.take_mail().bytes.len(), 1020);
        monitors.feed(&shared, &writer, &[b"get", b"k"]);
        assert_eq!(monitor.take_mail().bytes.len(), 0);
    }

    #[test]
    fn secrets_are_redacted() {
        let show = |name: &str, args: &[&'static str]| -> Vec<String> {
            let command = lookup(name.as_bytes()).unwrap();
            redacted(command, args.iter().map(|a| a.as_bytes()))
                .into_iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        };
        assert_eq!(show("auth", &["AUTH", "pw"]), ["AUTH", "(redacted)"]);
        assert_eq!(
            show("auth", &["auth", "u", "pw"]),
            ["auth", "(redacted)", "(redacted)"]
        );
        assert_eq!(
            show("auth", &["auth", "a", "b", "c"]),
            ["auth", "a", "b", "c"]
        );
        assert_eq!(
            show("hello", &["HELLO", "3", "SETNAME", "n", "auth", "u", "p"]),
            [
                "HELLO",
                "3",
                "SETNAME",
                "n",
                "auth",
                "(redacted)",
                "(redacted)"
            ]
        );
        assert_eq!(
            show(
                "config",
                &["config", "set", "maxclients", "5", "REQUIREPASS", "s"]
            ),
            [
                "config",
                "set",
                "maxclients",
                "5",
                "REQUIREPASS",
                "(redacted)"
            ]
        );
        assert_eq!(show("get", &["get", "auth"]), ["get", "auth"]);
    }

    #[test]
    fn admin_commands_are_hidden() {
        let hide = |args: &[&[u8]]| {
            let ranges: Vec<_> = {
                let mut at = 0;
                args.iter()
                    .map(|a| {
                        at += a.len();
                        at - a.len()..at
                    })
                    .collect()
            };
            let buf = args.concat();
            let args = Args::new(&buf, &ranges);
            hidden(
                lookup(args.get(0)).unwrap(),
                (args.len() > 1).then(|| args.get(1)),
            )
        };
        assert!(hide(&[b"config", b"get", b"x"]));
        assert!(hide(&[b"client", b"LIST"]));
        assert!(hide(&[b"client", b"kill", b"1.2.3.4:5"]));
        assert!(!hide(&[b"client", b"setname", b"x"]));
        assert!(!hide(&[b"get", b"k"]));
    }
}
