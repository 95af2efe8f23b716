//! The in-process RESP test harness: a server's shared state without sockets, connections that
//! feed RESP-encoded requests to `Session::process` and read back the reply bytes, and table-style
//! checks (`request`, `expected reply`) that run in order on one connection.
//!
//! Requests are written as command lines, split on spaces, with `"..."` quoting as in redis-cli
//! (`\"`, `\\`, `\n`, `\r`, `\t`, `\xHH` inside quotes; `""` is an empty argument). Replies are
//! rendered in a compact notation that keeps every RESP type apart, so a row states exactly what
//! goes over the wire:
//!
//! | RESP            | notation          |
//! |-----------------|-------------------|
//! | `+OK`           | `+OK`             |
//! | `-ERR x`        | `-ERR x`          |
//! | `:1`            | `:1`              |
//! | `$3 bar`        | `"bar"` (escaped) |
//! | `$-1` / `*-1`   | `$-1` / `*-1`     |
//! | `_` (RESP3)     | `_`               |
//! | array           | `[a, b]`          |
//! | map (RESP3)     | `{k: v, k2: v2}`  |
//! | set (RESP3)     | `~[a, b]`         |
//! | push (RESP3)    | `>[a, b]`         |
//! | double          | `,1.5`            |
//! | boolean         | `#t` / `#f`       |
//! | big number      | `(123`            |
//! | verbatim        | `=txt:text`       |
//!
//! An expected reply `*` accepts any reply (a row run for its effect); one ending in `...`
//! accepts any reply whose rendering starts with what precedes it.

use std::sync::Arc;

use crate::clients::ClientInfo;
use crate::config::Config;
use crate::protocol::Protocol;
use crate::session::Session;
use crate::shared::Shared;

/// A server's shared state as `main` builds it, from command-line style flags.
pub fn server(flags: &[&str]) -> Arc<Shared> {
    let args = std::iter::once("cairn-server").chain(flags.iter().copied());
    Shared::new(Config::from_args(args).expect("test config"))
}

/// One RESP connection to an in-process server.
pub struct Client {
    pub shared: Arc<Shared>,
    pub info: Arc<ClientInfo>,
    session: Session,
    /// Unconsumed input, as the network runtime keeps it.
    pending: Vec<u8>,
    /// The session asked to close the connection (QUIT, protocol error).
    pub closed: bool,
}

impl Client {
    /// A connection to a fresh server with the default configuration.
    pub fn new() -> Client {
        Client::on(&server(&[]))
    }

    /// A connection to a fresh server speaking RESP3 (HELLO 3 sent, its reply dropped).
    pub fn resp3() -> Client {
        let mut c = Client::new();
        c.hello3();
        c
    }

    /// Another connection to `shared`, registered like an accepted one (CLIENT LIST sees it).
    pub fn on(shared: &Arc<Shared>) -> Client {
        let info = Arc::new(ClientInfo::detached(
            shared.clients.next_id(),
            Protocol::Resp,
        ));
        shared.clients.register(info.clone());
        Client {
            shared: Arc::clone(shared),
            session: Session::new(Protocol::Resp, Arc::clone(shared), info.clone()),
            info,
            pending: Vec::new(),
            closed: false,
        }
    }

    /// Another connection to the same server.
    pub fn other(&self) -> Client {
        Client::on(&self.shared)
    }

    /// Switches this connection to RESP3.
    pub fn hello3(&mut self) {
        let reply = self.call(&[b"HELLO", b"3"]);
        assert!(reply.starts_with(b"%"), "HELLO 3: {}", render(&reply));
    }

    /// Feeds bytes as they might arrive from the socket and returns the replies they produced.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            let progress = self.session.process(&self.pending, &mut out);
            assert!(progress.consumed <= self.pending.len());
            self.pending.drain(..progress.consumed);
            if progress.close {
                self.closed = true;
                break;
            }
            if progress.waiting {
                // A deferred reply (SQL) arrives through the client's mailbox.
                out.extend_from_slice(&self.wait_for_mail());
                continue;
            }
            if progress.consumed == 0 || self.pending.is_empty() {
                break;
            }
        }
        out
    }

    /// What other threads post until the reply of a deferred command arrives (bounded wait).
    fn wait_for_mail(&self) -> Vec<u8> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut bytes = Vec::new();
        loop {
            if self.info.has_mail() {
                let mail = self.info.take_mail();
                bytes.extend_from_slice(&mail.bytes);
                if mail.resume {
                    return bytes;
                }
            }
            assert!(std::time::Instant::now() < deadline, "no deferred reply");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Sends one request given as its arguments and returns the reply bytes.
    pub fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let mut request = Vec::new();
        resp::value::encode_command(&mut request, args);
        self.feed(&request)
    }

    /// Sends one request written as a command line and returns the reply rendered.
    pub fn cmd(&mut self, line: &str) -> String {
        let args = split_line(line);
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        render(&self.call(&args))
    }

    /// Runs `(request, expected)` rows in order on this connection and fails with every row
    /// whose reply differs.
    pub fn check(&mut self, rows: &[(&str, &str)]) {
        let mut failures = Vec::new();
        for (i, (request, expected)) in rows.iter().enumerate() {
            let got = self.cmd(request);
            if !reply_matches(expected, &got) {
                failures.push(format!(
                    "row {i}: {request}\n    expected {expected}\n         got {got}"
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} rows failed:\n{}",
            failures.len(),
            rows.len(),
            failures.join("\n")
        );
    }
}

/// Runs the rows on a fresh RESP2 connection to a fresh server.
pub fn check2(rows: &[(&str, &str)]) {
    Client::new().check(rows)
}

/// Runs the rows on a fresh RESP3 connection to a fresh server.
pub fn check3(rows: &[(&str, &str)]) {
    Client::resp3().check(rows)
}

/// Runs rows whose replies are the same in both protocols, once in each.
pub fn check_both(rows: &[(&str, &str)]) {
    check2(rows);
    check3(rows);
}

/// Runs `(request, RESP2 reply, RESP3 reply)` rows, once on a RESP2 connection and once on a
/// RESP3 one (each to a fresh server); a RESP3 reply `=` is the same as the RESP2 one.
pub fn check_versions(rows: &[(&str, &str, &str)]) {
    let resp2: Vec<(&str, &str)> = rows.iter().map(|&(req, r2, _)| (req, r2)).collect();
    let resp3: Vec<(&str, &str)> = rows
        .iter()
        .map(|&(req, r2, r3)| (req, if r3 == "=" { r2 } else { r3 }))
        .collect();
    check2(&resp2);
    check3(&resp3);
}

fn reply_matches(expected: &str, got: &str) -> bool {
    match expected.strip_suffix("...") {
        _ if expected == "*" => true,
        Some(prefix) => got.starts_with(prefix),
        None => got == expected,
    }
}

/// Splits a command line into arguments, redis-cli style.
pub fn split_line(line: &str) -> Vec<Vec<u8>> {
    let mut args = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else {
            return args;
        };
        let mut arg = Vec::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next().expect("unterminated quote in request") {
                    '"' => break,
                    '\\' => match chars.next().expect("dangling escape in request") {
                        'n' => arg.push(b'\n'),
                        'r' => arg.push(b'\r'),
                        't' => arg.push(b'\t'),
                        'x' => {
                            let hex: String = [chars.next(), chars.next()]
                                .into_iter()
                                .map(|c| c.expect("two hex digits"))
                                .collect();
                            arg.push(u8::from_str_radix(&hex, 16).expect("hex escape"));
                        }
                        c => push_char(&mut arg, c),
                    },
                    c => push_char(&mut arg, c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                push_char(&mut arg, c);
            }
        }
        args.push(arg);
    }
}

fn push_char(arg: &mut Vec<u8>, c: char) {
    let mut buf = [0u8; 4];
    arg.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// Renders replies in the notation above (several replies are separated by ` | `).
pub fn render(bytes: &[u8]) -> String {
    let mut text = String::new();
    let mut pos = 0;
    while pos < bytes.len() {
        if pos > 0 {
            text.push_str(" | ");
        }
        pos = render_one(bytes, pos, &mut text);
    }
    text
}

fn line_at(bytes: &[u8], pos: usize) -> (&[u8], usize) {
    let end = bytes[pos..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| pos + i)
        .unwrap_or_else(|| panic!("truncated reply: {}", escape(&bytes[pos..])));
    (&bytes[pos..end], end + 2)
}

fn render_one(bytes: &[u8], pos: usize, text: &mut String) -> usize {
    let (line, mut next) = line_at(bytes, pos);
    let (kind, rest) = (line[0], &line[1..]);
    let rest_text = String::from_utf8_lossy(rest);
    let count = || -> i64 { rest_text.parse().expect("RESP length") };
    match kind {
        b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => {
            text.push(kind as char);
            text.push_str(&rest_text);
        }
        b'$' | b'=' | b'!' if count() < 0 => text.push_str(&format!("{}-1", kind as char)),
        b'$' | b'=' | b'!' => {
            let len = count() as usize;
            let data = &bytes[next..next + len];
            next += len + 2;
            match kind {
                b'$' => {
                    text.push('"');
                    text.push_str(&escape(data));
                    text.push('"');
                }
                b'=' => {
                    text.push('=');
                    text.push_str(&escape(data));
                }
                _ => {
                    text.push('-');
                    text.push_str(&escape(data));
                }
            }
        }
        b'*' if count() < 0 => text.push_str("*-1"),
        b'*' => next = render_items(bytes, next, "[", count(), text),
        b'~' => next = render_items(bytes, next, "~[", count(), text),
        b'>' => next = render_items(bytes, next, ">[", count(), text),
        b'%' => {
            text.push('{');
            for i in 0..count() {
                if i > 0 {
                    text.push_str(", ");
                }
                next = render_one(bytes, next, text);
                text.push_str(": ");
                next = render_one(bytes, next, text);
            }
            text.push('}');
        }
        _ => panic!("not a RESP reply: {}", escape(&bytes[pos..])),
    }
    next
}

fn render_items(bytes: &[u8], mut next: usize, open: &str, items: i64, text: &mut String) -> usize {
    text.push_str(open);
    for i in 0..items {
        if i > 0 {
            text.push_str(", ");
        }
        next = render_one(bytes, next, text);
    }
    text.push(']');
    next
}

fn escape(data: &[u8]) -> String {
    let mut s = String::new();
    for &b in data {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_like_redis_cli() {
        assert_eq!(
            split_line(r#"SET "a b" "" "x\"\\\r\n\x00" plain"#),
            vec![
                b"SET".to_vec(),
                b"a b".to_vec(),
                vec![],
                b"x\"\\\r\n\x00".to_vec(),
                b"plain".to_vec()
            ]
        );
    }

    #[test]
    fn replies_render_every_type_apart() {
        let bytes = b"+OK\r\n-ERR x\r\n:1\r\n$3\r\na\"b\r\n$-1\r\n*-1\r\n_\r\n\
            *2\r\n:1\r\n*0\r\n%1\r\n$1\r\nk\r\n~1\r\n,1.5\r\n>1\r\n#t\r\n(12\r\n=7\r\ntxt:abc\r\n";
        assert_eq!(
            render(bytes),
            r#"+OK | -ERR x | :1 | "a\"b" | $-1 | *-1 | _ | [:1, []] | {"k": ~[,1.5]} | >[#t] | (12 | =txt:abc"#
        );
    }

    #[test]
    fn a_failing_row_is_reported() {
        let result = std::panic::catch_unwind(|| check2(&[("PING", "+PONG"), ("PING", ":1")]));
        let message = *result.unwrap_err().downcast::<String>().unwrap();
        assert!(message.contains("1 of 2 rows failed"), "{message}");
        assert!(message.contains("row 1: PING"), "{message}");
    }

    #[test]
    fn requests_split_across_reads_are_answered_once_complete() {
        let mut c = Client::new();
        assert_eq!(c.feed(b"*2\r\n$4\r\nECHO\r\n$2\r\nh"), b"");
        assert_eq!(
            c.feed(b"i\r\n*1\r\n$4\r\nPING\r\n"),
            b"$2\r\nhi\r\n+PONG\r\n"
        );
    }
}
