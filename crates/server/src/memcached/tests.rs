use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use store::{now_ms, Kind};

use super::*;
use crate::config::Config;
use crate::protocol::Protocol;

struct Conn {
    shared: Arc<Shared>,
    /// The connection's command-path state, as the session holds it.
    conn: crate::command::Conn,
    state: McState,
    /// Unconsumed input, as the network runtime keeps it.
    pending: Vec<u8>,
    closed: bool,
}

impl Conn {
    fn new() -> Conn {
        let config = Config::from_args(["cairn-server"]).expect("default config");
        Conn::with(Shared::new(config))
    }

    fn with(shared: Arc<Shared>) -> Conn {
        Conn {
            shared,
            conn: crate::command::Conn::new(
                Arc::new(ClientInfo::detached(1, Protocol::Memcache)),
                true,
            ),
            state: McState::default(),
            pending: Vec::new(),
            closed: false,
        }
    }

    /// Another connection to the same server.
    fn other(&self) -> Conn {
        Conn::with(Arc::clone(&self.shared))
    }

    /// Feeds bytes as they might arrive from the socket and returns the replies they produced.
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            // Each call gets an empty buffer, as after the runtime flushed the last one.
            let mut batch = Vec::new();
            let (consumed, close, _) =
                self.state
                    .process(&self.shared, &mut self.conn, &self.pending, &mut batch);
            out.extend_from_slice(&batch);
            assert!(consumed <= self.pending.len());
            self.pending.drain(..consumed);
            if close {
                self.closed = true;
                break;
            }
            if consumed == 0 || self.pending.is_empty() {
                break;
            }
        }
        out
    }

    fn send(&mut self, text: &str) -> String {
        String::from_utf8(self.feed(text.as_bytes())).expect("utf-8 reply")
    }

    /// The CAS of `key` from `gets`.
    fn cas(&mut self, key: &str) -> u64 {
        let reply = self.send(&format!("gets {key}\r\n"));
        let line = reply.lines().next().expect("VALUE line");
        line.split(' ')
            .nth(4)
            .expect("cas field")
            .parse()
            .expect("cas")
    }

    fn stat(&mut self, name: &str) -> String {
        let reply = self.send("stats\r\n");
        let prefix = format!("STAT {name} ");
        reply
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no stat {name}"))
            .to_string()
    }
}

#[test]
fn set_get_gets_and_flags() {
    let mut c = Conn::new();
    assert_eq!(c.send("set foo 42 0 3\r\nbar\r\n"), "STORED\r\n");
    assert_eq!(c.send("get foo\r\n"), "VALUE foo 42 3\r\nbar\r\nEND\r\n");
    let cas = c.cas("foo");
    assert_eq!(
        c.send("gets foo nope foo\r\n"),
        format!("VALUE foo 42 3 {cas}\r\nbar\r\nVALUE foo 42 3 {cas}\r\nbar\r\nEND\r\n")
    );
    assert_eq!(c.send("get nope\r\n"), "END\r\n");
    assert_eq!(
        c.send("set empty 0 0 0\r\n\r\nget empty\r\n"),
        "STORED\r\nVALUE empty 0 0\r\n\r\nEND\r\n"
    );
    assert_eq!(
        c.send("set big 4294967295 0 1\r\nx\r\nget big\r\n"),
        "STORED\r\nVALUE big 4294967295 1\r\nx\r\nEND\r\n"
    );
}

#[test]
fn storage_commands() {
    let mut c = Conn::new();
    assert_eq!(c.send("add k 0 0 1\r\na\r\n"), "STORED\r\n");
    assert_eq!(c.send("add k 0 0 1\r\nb\r\n"), "NOT_STORED\r\n");
    assert_eq!(c.send("replace nope 0 0 1\r\nb\r\n"), "NOT_STORED\r\n");
    assert_eq!(c.send("replace k 5 0 1\r\nb\r\n"), "STORED\r\n");
    assert_eq!(c.send("append k 9 9 2\r\ncd\r\n"), "STORED\r\n");
    assert_eq!(c.send("prepend k 9 9 2\r\nxy\r\n"), "STORED\r\n");
    // append/prepend keep the flags.
    assert_eq!(c.send("get k\r\n"), "VALUE k 5 5\r\nxybcd\r\nEND\r\n");
    assert_eq!(c.send("append nope 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
    assert_eq!(c.send("prepend nope 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");

    let cas = c.cas("k");
    assert_eq!(
        c.send(&format!("cas k 1 0 1 {}\r\nz\r\n", cas + 1)),
        "EXISTS\r\n"
    );
    assert_eq!(c.send(&format!("cas k 1 0 1 {cas}\r\nz\r\n")), "STORED\r\n");
    assert_eq!(c.send(&format!("cas k 1 0 1 {cas}\r\nz\r\n")), "EXISTS\r\n");
    assert_eq!(c.send("cas nope 0 0 1 1\r\nz\r\n"), "NOT_FOUND\r\n");
    assert_eq!(c.send("get k\r\n"), "VALUE k 1 1\r\nz\r\nEND\r\n");

    assert_eq!(c.send("delete k\r\n"), "DELETED\r\n");
    assert_eq!(c.send("delete k\r\n"), "NOT_FOUND\r\n");
    assert_eq!(c.send("delete k 0\r\n"), "NOT_FOUND\r\n");
    assert_eq!(c.stat("cas_hits"), "1");
    assert_eq!(c.stat("cas_badval"), "2");
    assert_eq!(c.stat("cas_misses"), "1");
    assert_eq!(c.stat("delete_hits"), "1");
    assert_eq!(c.stat("delete_misses"), "2");
}

#[test]
fn noreply_everywhere() {
    let mut c = Conn::new();
    let quiet = "set a 0 0 1 noreply\r\n1\r\n\
                 add a 0 0 1 noreply\r\n2\r\n\
                 add b 0 0 1 noreply\r\n2\r\n\
                 replace b 0 0 1 noreply\r\n3\r\n\
                 append b 0 0 1 noreply\r\n4\r\n\
                 prepend b 0 0 1 noreply\r\n5\r\n\
                 cas b 0 0 1 1 noreply\r\n6\r\n\
                 incr a 5 noreply\r\n\
                 decr a 1 noreply\r\n\
                 incr b 1 noreply\r\n\
                 touch a 100 noreply\r\n\
                 delete nope noreply\r\n\
                 verbosity 1 noreply\r\n\
                 flush_all noreply\r\n";
    assert_eq!(c.send(quiet), "");
    assert_eq!(
        c.send("set a 0 0 1 noreply\r\n1\r\nincr a 5 noreply\r\nget a b\r\n"),
        "VALUE a 0 1\r\n6\r\nEND\r\n"
    );
    // Errors are silent too on a text command asking for no reply...
    assert_eq!(c.send("set x 0 0 1 noreply\r\nab\n"), "");
    // ...but not when the line cannot be read.
    assert_eq!(c.send("set x 0 zz 1 noreply\r\n"), "");
    assert_eq!(c.send("set x 0\r\n"), "ERROR\r\n");
}

#[test]
fn requests_split_across_reads() {
    let mut c = Conn::new();
    let script = b"set foo 3 0 10\r\n0123\r\n6789\r\nget foo\r\nmg foo v f\r\nincr n 1\r\nquit\r\n";
    let mut out = Vec::new();
    for &b in script.iter() {
        out.extend(c.feed(&[b]));
    }
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "STORED\r\nVALUE foo 3 10\r\n0123\r\n6789\r\nEND\r\nVA 10 f3\r\n0123\r\n6789\r\nNOT_FOUND\r\n"
    );
    assert!(c.closed);
}

#[test]
fn pipeline_in_one_read() {
    let mut c = Conn::new();
    let mut script = String::new();
    let mut expected = String::new();
    for i in 0..100 {
        script.push_str(&format!(
            "set k{i} {i} 0 {}\r\n{i}\r\n",
            i.to_string().len()
        ));
        expected.push_str("STORED\r\n");
    }
    for i in 0..100 {
        script.push_str(&format!("get k{i}\r\n"));
        expected.push_str(&format!(
            "VALUE k{i} {i} {}\r\n{i}\r\nEND\r\n",
            i.to_string().len()
        ));
    }
    script.push_str("mn\r\n");
    expected.push_str("MN\r\n");
    assert_eq!(c.send(&script), expected);
}

#[test]
fn quit_stops_processing() {
    let mut c = Conn::new();
    let mut out = Vec::new();
    let input = b"version\r\nquit\r\nget a\r\n";
    let (consumed, close, commands) = c.state.process(&c.shared, &mut c.conn, input, &mut out);
    assert!(close);
    assert_eq!(consumed, b"version\r\nquit\r\n".len());
    assert_eq!(commands, 2);
    assert_eq!(out, format!("VERSION {VERSION}\r\n").as_bytes());
    assert!(VERSION.starts_with("1.6."));
}

#[test]
fn too_large_value_is_swallowed_as_it_arrives() {
    let mut c = Conn::new();
    c.shared.settings.max_value_size.store(16, Relaxed);
    assert_eq!(c.send("set k 0 0 3\r\nold\r\n"), "STORED\r\n");
    // The refused block holds text that must not run as commands.
    assert_eq!(
        c.send("set k 0 0 30\r\nget k\r\n"),
        "SERVER_ERROR object too large for cache\r\n"
    );
    assert!(c.pending.is_empty());
    assert_eq!(c.send("delete k\r\nflush_all\r\n"), "");
    // 30 + 2 bytes in all: 7 + 21 sent so far, 4 to go.
    assert_eq!(c.send("ab\r\nmn\r\n"), "MN\r\n");
    // memcached drops the old value of a refused set.
    assert_eq!(c.send("get k\r\n"), "END\r\n");
    assert_eq!(
        c.send("set k 0 0 17 noreply\r\n01234567890123456\r\nmn\r\n"),
        "MN\r\n"
    );
    assert_eq!(
        c.send("ms k 20 T0\r\n01234567890123456789\r\nmn\r\n"),
        "SERVER_ERROR object too large for cache\r\nMN\r\n"
    );
    assert_eq!(c.send("set k 0 0 16\r\n0123456789abcdef\r\n"), "STORED\r\n");
    assert_eq!(c.stat("store_too_large"), "3");
}

#[test]
fn long_keys_are_refused() {
    let mut c = Conn::new();
    let ok = "k".repeat(250);
    let long = "k".repeat(251);
    assert_eq!(c.send(&format!("set {ok} 0 0 1\r\nx\r\n")), "STORED\r\n");
    assert_eq!(
        c.send(&format!("get {ok}\r\n")),
        format!("VALUE {ok} 0 1\r\nx\r\nEND\r\n")
    );
    assert_eq!(
        c.send(&format!("get {long}\r\n")),
        "CLIENT_ERROR bad command line format\r\n"
    );
    assert_eq!(
        c.send(&format!("mg {long} v\r\n")),
        "CLIENT_ERROR bad command line format\r\n"
    );
}

#[test]
fn overlong_line_closes() {
    let mut c = Conn::new();
    let junk = "x".repeat(3000);
    assert_eq!(c.send(&junk), "");
    assert!(c.closed);
}

#[test]
fn incr_decr() {
    let mut c = Conn::new();
    assert_eq!(c.send("incr n 1\r\n"), "NOT_FOUND\r\n");
    assert_eq!(
        c.send("set n 7 100 20\r\n18446744073709551614\r\n"),
        "STORED\r\n"
    );
    assert_eq!(c.send("incr n 1\r\n"), "18446744073709551615\r\n");
    assert_eq!(c.send("incr n 2\r\n"), "1\r\n");
    assert_eq!(c.send("decr n 5\r\n"), "0\r\n");
    assert_eq!(c.send("incr n 10\r\ndecr n 3\r\n"), "10\r\n7\r\n");
    // TTL and flags are kept.
    assert_eq!(c.send("mg n f t v\r\n"), "VA 1 f7 t100\r\n7\r\n");
    assert_eq!(
        c.send("set s 0 0 3\r\nabc\r\nincr s 1\r\n"),
        "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
    assert_eq!(
        c.send("set s 0 0 0\r\n\r\nincr s 1\r\n"),
        "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
    assert_eq!(
        c.send("set s 0 0 4\r\n 12 \r\nincr s 1\r\n"),
        "STORED\r\n13\r\n"
    );
    assert_eq!(
        c.send("incr s -1\r\n"),
        "CLIENT_ERROR invalid numeric delta argument\r\n"
    );
    assert_eq!(c.stat("incr_hits"), "4");
    assert_eq!(c.stat("incr_misses"), "1");
    assert_eq!(c.stat("decr_hits"), "2");
}

#[test]
fn counter_parsing() {
    assert_eq!(parse_counter(b"0"), Some(0));
    assert_eq!(parse_counter(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(parse_counter(b"18446744073709551616"), None);
    assert_eq!(parse_counter(b"  5  "), Some(5));
    assert_eq!(parse_counter(b"+5"), Some(5));
    assert_eq!(parse_counter(b"-0"), Some(0));
    assert_eq!(parse_counter(b"-5"), None);
    assert_eq!(parse_counter(b"5x"), None);
    assert_eq!(parse_counter(b"5 x"), Some(5));
    assert_eq!(parse_counter(b""), None);
    assert_eq!(parse_counter(b" "), None);
}

#[test]
fn expiry_rules() {
    let now = 1_700_000_000_000;
    assert_eq!(Expiry::from_exptime(0, now), Expiry::Never);
    assert_eq!(Expiry::from_exptime(-1, now), Expiry::Expired);
    assert_eq!(Expiry::from_exptime(10, now), Expiry::At(now + 10_000));
    assert_eq!(
        Expiry::from_exptime(REALTIME_MAXDELTA, now),
        Expiry::At(now + REALTIME_MAXDELTA as u64 * 1000)
    );
    assert_eq!(
        Expiry::from_exptime(REALTIME_MAXDELTA + 1, now),
        Expiry::Expired
    );
    assert_eq!(
        Expiry::from_exptime(1_800_000_000, now),
        Expiry::At(1_800_000_000_000)
    );
    assert_eq!(ttl_secs(None, now), -1);
    assert_eq!(ttl_secs(Some(now + 29_001), now), 30);
    assert_eq!(ttl_secs(Some(now - 5), now), 0);
}

#[test]
fn expiration_times() {
    let mut c = Conn::new();
    assert_eq!(c.send("set a 0 0 1\r\n1\r\n"), "STORED\r\n");
    // Negative: stored and gone at once (the old value too).
    assert_eq!(
        c.send("set a 0 -1 1\r\n2\r\nget a\r\n"),
        "STORED\r\nEND\r\n"
    );
    assert_eq!(
        c.send("add a 0 -1 1\r\n2\r\nget a\r\n"),
        "STORED\r\nEND\r\n"
    );
    // An absolute time in the past.
    assert_eq!(
        c.send("set a 0 1000000000 1\r\n2\r\nget a\r\n"),
        "STORED\r\nEND\r\n"
    );
    // An absolute time in the future.
    let future = now_ms() / 1000 + 3600;
    assert_eq!(
        c.send(&format!("set a 0 {future} 1\r\n3\r\nget a\r\n")),
        "STORED\r\nVALUE a 0 1\r\n3\r\nEND\r\n"
    );
    let t: i64 = c
        .send("mg a t\r\n")
        .trim_end()
        .strip_prefix("HD t")
        .unwrap()
        .parse()
        .unwrap();
    assert!((3599..=3600).contains(&t), "{t}");
    // Relative; touch and gat change it without changing the CAS.
    assert_eq!(
        c.send("set a 0 100 1\r\n4\r\nmg a t\r\n"),
        "STORED\r\nHD t100\r\n"
    );
    let cas = c.cas("a");
    assert_eq!(
        c.send("touch a 200\r\nmg a t\r\n"),
        "TOUCHED\r\nHD t200\r\n"
    );
    assert_eq!(c.send("touch a 0\r\nmg a t\r\n"), "TOUCHED\r\nHD t-1\r\n");
    assert_eq!(
        c.send("gats 50 a nope\r\n"),
        format!("VALUE a 0 1 {cas}\r\n4\r\nEND\r\n")
    );
    assert_eq!(c.send("mg a t c\r\n"), format!("HD t50 c{cas}\r\n"));
    assert_eq!(
        c.send("gat -1 a\r\nget a\r\n"),
        "VALUE a 0 1\r\n4\r\nEND\r\nEND\r\n"
    );
    assert_eq!(c.send("touch a 10\r\n"), "NOT_FOUND\r\n");
    assert_eq!(
        c.send("set a 0 0 1\r\n5\r\ntouch a -1\r\nget a\r\n"),
        "STORED\r\nTOUCHED\r\nEND\r\n"
    );
    assert_eq!(c.stat("touch_hits"), "5");
    assert_eq!(c.stat("touch_misses"), "2");
}

#[test]
fn short_ttl_expires() {
    let mut c = Conn::new();
    assert_eq!(
        c.send("set a 0 1 1\r\n1\r\nget a\r\n"),
        "STORED\r\nVALUE a 0 1\r\n1\r\nEND\r\n"
    );
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(c.send("get a\r\n"), "END\r\n");
}

#[test]
fn flush_all_now_and_later() {
    let mut c = Conn::new();
    assert_eq!(
        c.send("set a 0 0 1\r\n1\r\nflush_all\r\nget a\r\n"),
        "STORED\r\nOK\r\nEND\r\n"
    );
    assert_eq!(
        c.send("set a 0 0 1\r\n1\r\nflush_all 1\r\nget a\r\n"),
        "STORED\r\nOK\r\nVALUE a 0 1\r\n1\r\nEND\r\n"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.send("get a\r\n"), "END\r\n");
    // A later flush_all replaces a pending one.
    assert_eq!(
        c.send("flush_all 1\r\nflush_all 0\r\nset a 0 0 1\r\n1\r\n"),
        "OK\r\nOK\r\nSTORED\r\n"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.send("get a\r\n"), "VALUE a 0 1\r\n1\r\nEND\r\n");
    assert_eq!(c.stat("cmd_flush"), "4");
}

#[test]
fn hash_records_are_invisible() {
    let mut c = Conn::new();
    c.shared
        .store
        .write(store::Author::SERVER, b"h", |e| {
            e.put(Kind::Hash, b"\x00\x01", None, 0)
        })
        .expect("put");
    assert_eq!(c.send("get h\r\n"), "END\r\n");
    assert_eq!(c.send("mg h v\r\n"), "EN\r\n");
    assert_eq!(c.send("mg h v N30\r\n"), "EN\r\n");
    assert_eq!(c.send("append h 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
    assert_eq!(c.send("prepend h 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
    assert_eq!(c.send("ms h 1 MA\r\nx\r\n"), "NS\r\n");
    assert_eq!(
        c.send("incr h 1\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
    assert_eq!(
        c.send("ma h\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
    assert_eq!(c.send("add h 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
    assert_eq!(c.send("me h\r\n"), "EN\r\n");
    c.shared
        .store
        .read(b"h", |i| assert_eq!(i.map(|i| i.kind()), Some(Kind::Hash)));
    // set replaces it, as RESP SET would.
    assert_eq!(
        c.send("set h 0 0 1\r\nx\r\nget h\r\n"),
        "STORED\r\nVALUE h 0 1\r\nx\r\nEND\r\n"
    );
}

#[test]
fn shared_keyspace_with_resp() {
    let mut c = Conn::new();
    // Written as RESP SET does it.
    c.shared.store.write(store::Author::SERVER, b"r", |e| {
        crate::keyspace::store(
            e,
            &crate::keyspace::StoreArgs {
                value: b"from-resp",
                cond: crate::keyspace::Cond::Always,
                ttl: crate::keyspace::Ttl::Set(None),
                flags: 0,
                cas: None,
            },
        )
    });
    assert_eq!(c.send("get r\r\n"), "VALUE r 0 9\r\nfrom-resp\r\nEND\r\n");
    assert_eq!(c.send("set m 5 0 2\r\nmc\r\n"), "STORED\r\n");
    let value = c.shared.store.read(b"m", |i| i.map(|i| i.value().to_vec()));
    assert_eq!(value.as_deref(), Some(&b"mc"[..]));
}

#[test]
fn meta_get_flags() {
    let mut c = Conn::new();
    assert_eq!(c.send("ms foo 3 F5 T100\r\nbar\r\n"), "HD\r\n");
    let cas = c.cas("foo");
    assert_eq!(
        c.send("mg foo s v f t c k Oxyz q\r\n"),
        format!("VA 3 s3 f5 t100 c{cas} kfoo Oxyz\r\nbar\r\n")
    );
    assert_eq!(c.send("mg foo\r\n"), "HD\r\n");
    assert_eq!(c.send("mg nope v\r\n"), "EN\r\n");
    assert_eq!(c.send("mg nope v q\r\nmn\r\n"), "MN\r\n");
    assert_eq!(c.send("mg nope v k O1\r\n"), "EN knope O1\r\n");
    // h: whether it was read before this request.
    assert_eq!(
        c.send("ms h 1\r\nx\r\nmg h h\r\nmg h h\r\n"),
        "HD\r\nHD h0\r\nHD h1\r\n"
    );
    // T updates the TTL; a t before it shows the old one.
    assert_eq!(c.send("mg foo t T30\r\n"), "HD t100\r\n");
    assert_eq!(c.send("mg foo t\r\n"), "HD t30\r\n");
    assert_eq!(
        c.send("mg foo T-1 v\r\nmg foo v\r\n"),
        "VA 3\r\nbar\r\nEN\r\n"
    );
    assert_eq!(c.send("mg foo zz\r\n"), "CLIENT_ERROR invalid flag\r\n");
    assert_eq!(c.send("mg foo v v\r\n"), "CLIENT_ERROR duplicate flag\r\n");
}

#[test]
fn meta_base64_keys() {
    let mut c = Conn::new();
    // "foo" is Zm9v; a binary key goes back base64-encoded, followed by b.
    assert_eq!(c.send("ms Zm9v 2 b k\r\nhi\r\n"), "HD kZm9v b\r\n");
    assert_eq!(c.send("get foo\r\n"), "VALUE foo 0 2\r\nhi\r\nEND\r\n");
    assert_eq!(c.send("mg Zm9v b v k\r\n"), "VA 2 kZm9v b\r\nhi\r\n");
    assert_eq!(c.send("me Zm9v b\r\n").split(' ').next(), Some("ME"));
    assert!(c
        .send("me Zm9v b\r\n")
        .starts_with("ME Zm9v exp=-1 la=0 cas="));
    assert_eq!(c.send("ma AP8= b N0 J7 v k\r\n"), "VA 1 kAP8= b\r\n7\r\n");
    assert_eq!(
        c.send("md Zm9v b k\r\nmd Zm9v b k\r\n"),
        "HD kZm9v b\r\nNF kZm9v b\r\n"
    );
    assert_eq!(
        c.send("mg foo b\r\n"),
        "CLIENT_ERROR error decoding key\r\n"
    );
}

#[test]
fn meta_set_modes() {
    let mut c = Conn::new();
    assert_eq!(
        c.send("ms a 2 MX\r\nhi\r\n"),
        "CLIENT_ERROR invalid mode for ms M token\r\n"
    );
    assert_eq!(
        c.send("ms a 2 ME\r\nhi\r\nms a 2 ME\r\nho\r\n"),
        "HD\r\nNS\r\n"
    );
    assert_eq!(c.send("ms b 2 MR\r\nzz\r\nms a 2 MR q\r\nzz\r\n"), "NS\r\n");
    assert_eq!(
        c.send("ms a 2 MA s\r\nyy\r\nms a 2 MP s\r\nxx\r\n"),
        "HD s4\r\nHD s6\r\n"
    );
    assert_eq!(c.send("mg a v\r\n"), "VA 6\r\nxxzzyy\r\n");
    assert_eq!(c.send("ms b 2 MA\r\nzz\r\n"), "NS\r\n");
    // N: append to a missing key creates it, with N's TTL.
    assert_eq!(
        c.send("ms b 2 MA N50\r\nzz\r\nmg b v t\r\n"),
        "HD\r\nVA 2 t50\r\nzz\r\n"
    );
    let cas = c.cas("a");
    assert_eq!(
        c.send(&format!("ms a 1 MA C{}\r\nq\r\n", cas + 1)),
        "EX\r\n"
    );
    assert_eq!(c.send(&format!("ms a 1 MA C{cas}\r\nq\r\n")), "HD\r\n");
    // C turns set into a CAS store.
    let cas = c.cas("a");
    assert_eq!(
        c.send(&format!("ms a 1 C{} c\r\nq\r\n", cas + 1)),
        "EX c0\r\n"
    );
    assert_eq!(c.send("ms nope 1 C1\r\nq\r\n"), "NF\r\n");
    let reply = c.send(&format!("ms a 1 C{cas} c k O9\r\nq\r\n"));
    let new_cas = c.cas("a");
    assert_eq!(reply, format!("HD c{new_cas} ka O9\r\n"));
    // E sets the CAS.
    assert_eq!(c.send("ms a 1 E12345 c\r\nq\r\n"), "HD c12345\r\n");
    assert_eq!(c.cas("a"), 12345);
    assert_eq!(c.send("ms a 1 F3 T-1\r\nq\r\nmg a v\r\n"), "HD\r\nEN\r\n");
    assert_eq!(
        c.send("ms a 2 T0\r\nhi\r\nms a 2 q\r\nho\r\nmn\r\n"),
        "HD\r\nMN\r\n"
    );
    assert_eq!(c.send("ms a 2\r\nhiX\n"), "CLIENT_ERROR bad data chunk\r\n");
    assert_eq!(
        c.send("ms a 2 S2\r\nhi\r\nmn\r\n"),
        "CLIENT_ERROR invalid flag\r\nMN\r\n"
    );
}

#[test]
fn meta_stale_while_revalidate() {
    let mut c = Conn::new();
    let mut d = c.other();
    assert_eq!(c.send("set foo 0 0 3\r\nbar\r\n"), "STORED\r\n");
    let before = c.cas("foo");
    assert_eq!(c.send("md foo I T30\r\n"), "HD\r\n");
    let after = c.cas("foo");
    assert_ne!(before, after, "invalidation bumps the CAS");
    // The first client to see the stale value wins the recache; others are told it is taken.
    assert_eq!(c.send("mg foo v t\r\n"), "VA 3 t30 X W\r\nbar\r\n");
    assert_eq!(d.send("mg foo v t\r\n"), "VA 3 t30 Z X\r\nbar\r\n");
    assert_eq!(d.send("mg foo v\r\n"), "VA 3 Z X\r\nbar\r\n");
    // A new value clears the marks.
    assert_eq!(c.send("ms foo 3 T0\r\nnew\r\n"), "HD\r\n");
    assert_eq!(d.send("mg foo v\r\n"), "VA 3\r\nnew\r\n");

    // Invalidating again lets a new client win.
    assert_eq!(
        c.send("md foo I q\r\nmg foo\r\nmg foo\r\n"),
        "HD X W\r\nHD Z X\r\n"
    );

    // ms with I and an older CAS stores, but the value stays stale.
    assert_eq!(c.send("ms foo 3 T0\r\nv1 \r\n"), "HD\r\n");
    let cas = c.cas("foo");
    assert_eq!(
        c.send(&format!("ms foo 3 C{} I\r\nold\r\n", cas - 1)),
        "HD\r\n"
    );
    assert_eq!(d.send("mg foo v\r\n"), "VA 3 X W\r\nold\r\n");
    let newer = c.cas("foo") + 1;
    assert_eq!(c.send(&format!("ms foo 3 C{newer} I\r\nnew\r\n")), "EX\r\n");
}

#[test]
fn meta_vivify_and_recache() {
    let mut c = Conn::new();
    let mut d = c.other();
    assert_eq!(c.send("mg miss N30 v t s\r\n"), "VA 0 t30 s0 W\r\n\r\n");
    assert_eq!(d.send("mg miss N30 v t\r\n"), "VA 0 t30 Z\r\n\r\n");
    assert_eq!(d.send("mg miss k\r\n"), "HD kmiss Z\r\n");
    assert_eq!(c.send("get miss\r\n"), "VALUE miss 0 0\r\n\r\nEND\r\n");
    assert_eq!(c.send("mg new N30 E777 c\r\n"), "HD c777 W\r\n");
    // R: win when the remaining TTL is below the token, once.
    assert_eq!(c.send("set r 0 100 1\r\n1\r\n"), "STORED\r\n");
    assert_eq!(c.send("mg r R30 v\r\n"), "VA 1\r\n1\r\n");
    assert_eq!(c.send("mg r R300 v\r\n"), "VA 1 W\r\n1\r\n");
    assert_eq!(d.send("mg r R300 v\r\n"), "VA 1 Z\r\n1\r\n");
    assert_eq!(
        c.send("set r 0 0 1\r\n1\r\nmg r R300\r\n"),
        "STORED\r\nHD\r\n"
    );
}

#[test]
fn meta_delete() {
    let mut c = Conn::new();
    // Quiet mode hides only HD: a miss is still answered (memcached 1.6).
    assert_eq!(
        c.send("md nope\r\nmd nope q\r\nmn\r\n"),
        "NF\r\nNF\r\nMN\r\n"
    );
    assert_eq!(
        c.send("set a 3 0 2\r\nhi\r\nmd a q\r\nget a\r\n"),
        "STORED\r\nEND\r\n"
    );
    assert_eq!(c.send("set a 3 0 2\r\nhi\r\n"), "STORED\r\n");
    let cas = c.cas("a");
    assert_eq!(
        c.send(&format!("md a C{} k O5\r\n", cas + 1)),
        "EX ka O5\r\n"
    );
    assert_eq!(
        c.send(&format!("md a C{cas} x\r\nmg a v f c\r\n")),
        format!("HD\r\nVA 0 f0 c{cas}\r\n\r\n")
    );
    assert_eq!(
        c.send("md a x I T40 E99\r\nmg a t c v\r\n"),
        "HD\r\nVA 0 t40 c99 X W\r\n\r\n"
    );
    assert_eq!(c.send("md a\r\nmg a\r\n"), "HD\r\nEN\r\n");
    assert_eq!(
        c.send("md a zz\r\n"),
        "CLIENT_ERROR invalid or duplicate flag\r\n"
    );
}

#[test]
fn meta_arithmetic() {
    let mut c = Conn::new();
    assert_eq!(c.send("ma n\r\nma n q O1\r\n"), "NF\r\nNF O1\r\n");
    assert_eq!(c.send("ma n N0 J10 v\r\n"), "VA 2\r\n10\r\n");
    assert_eq!(
        c.send("ma n\r\nma n q\r\nmg n v\r\n"),
        "HD\r\nVA 2\r\n12\r\n"
    );
    assert_eq!(c.send("ma n MD D100 v\r\n"), "VA 1\r\n0\r\n");
    assert_eq!(
        c.send("ma n M- v\r\nma n M+ D5 v\r\nma n MI v\r\n"),
        "VA 1\r\n0\r\nVA 1\r\n5\r\nVA 1\r\n6\r\n"
    );
    assert_eq!(c.send("ma n D18446744073709551615 v\r\n"), "VA 1\r\n5\r\n");
    assert_eq!(
        c.send("ma n MQ\r\n"),
        "CLIENT_ERROR invalid mode for ma M token\r\n"
    );
    assert_eq!(
        c.send("ma n Dx\r\n"),
        "CLIENT_ERROR invalid or duplicate flag\r\n"
    );
    assert_eq!(c.send("ma n t T100 v q\r\nmg n t\r\n"), "HD t100\r\n");
    let cas = c.cas("n");
    assert_eq!(c.send(&format!("ma n C{} v\r\n", cas + 1)), "EX\r\n");
    let reply = c.send(&format!("ma n C{cas} c k\r\n"));
    assert_eq!(reply, format!("HD c{} kn\r\n", c.cas("n")));
    assert_eq!(c.send("ma n E5 c v\r\n"), "VA 1 c5\r\n8\r\n");
    assert_eq!(
        c.send("ma t N100 t\r\nma t2 t N100\r\n"),
        "HD t100\r\nHD t-1\r\n"
    );
    assert_eq!(
        c.send("set s 0 0 1\r\nx\r\nma s\r\n"),
        "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
}

#[test]
fn meta_debug_and_noop() {
    let mut c = Conn::new();
    assert_eq!(c.send("mn\r\n"), "MN\r\n");
    assert_eq!(c.send("me nope\r\n"), "EN\r\n");
    assert_eq!(c.send("set k 0 0 1\r\nx\r\n"), "STORED\r\n");
    let cas = c.cas("k");
    let reply = c.send("me k\r\n");
    assert!(
        reply.starts_with(&format!("ME k exp=-1 la=0 cas={cas} fetch=yes cls=1 size=")),
        "{reply}"
    );
    assert_eq!(c.stat("cmd_meta"), "3");
}

#[test]
fn stats_counters() {
    let mut c = Conn::new();
    let mut d = c.other();
    d.send("set a 0 0 1\r\n1\r\nget a b\r\ngets a\r\nmg a\r\nmg b\r\ntouch a 10\r\ntouch b 1\r\n");
    assert_eq!(c.stat("cmd_get"), "5");
    assert_eq!(c.stat("get_hits"), "3");
    assert_eq!(c.stat("get_misses"), "2");
    assert_eq!(c.stat("cmd_set"), "1");
    assert_eq!(c.stat("cmd_touch"), "2");
    assert_eq!(c.stat("curr_items"), "1");
    assert_eq!(c.stat("total_items"), "1");
    assert_eq!(c.stat("version"), VERSION);
    assert_eq!(c.stat("pid"), std::process::id().to_string());
    assert_eq!(c.stat("evictions"), "0");
    let reply = c.send("stats\r\n");
    assert!(reply.ends_with("END\r\n"));
    assert!(reply
        .lines()
        .filter(|l| *l != "END")
        .all(|l| l.starts_with("STAT ")));
    assert_eq!(c.send("stats reset\r\n"), "RESET\r\n");
    assert_eq!(c.stat("cmd_get"), "0");
    assert_eq!(c.send("stats nope\r\n"), "ERROR\r\n");
    assert_eq!(
        c.send("stats sizes\r\n"),
        "STAT sizes_status disabled\r\nEND\r\n"
    );
    assert!(c.send("stats settings\r\n").ends_with("END\r\n"));
    assert!(c
        .send("stats items\r\n")
        .starts_with("STAT items:1:number 1\r\n"));
    assert!(c.send("stats slabs\r\n").ends_with("END\r\n"));
    assert_eq!(
        c.send("stats detail\r\n"),
        "CLIENT_ERROR usage: stats detail on|off|dump\r\n"
    );
}

#[test]
fn unknown_and_malformed() {
    let mut c = Conn::new();
    assert_eq!(
        c.send("bogus\r\n\r\nGET a\r\n"),
        "ERROR\r\nERROR\r\nERROR\r\n"
    );
    assert_eq!(c.send("verbosity 1\r\nverbosity\r\n"), "OK\r\nERROR\r\n");
    assert_eq!(
        c.send("flush_all abc\r\n"),
        "CLIENT_ERROR invalid exptime argument\r\n"
    );
    // The refused block is exactly 1 + 2 bytes: the "\n" left over is an empty line.
    assert_eq!(
        c.send("set k 0 0 1\r\nxy\r\nget k\r\n"),
        "CLIENT_ERROR bad data chunk\r\nERROR\r\nEND\r\n"
    );
    // Bare \n line endings work too.
    assert_eq!(
        c.send("set k 0 0 1\nx\r\nget k\n"),
        "STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\n"
    );
}

#[test]
fn output_is_bounded_per_call() {
    let mut c = Conn::new();
    let value = "v".repeat(100_000);
    c.send(&format!("set big 0 0 {}\r\n{value}\r\n", value.len()));
    let gets = "get big\r\n".repeat(30);
    let mut out = Vec::new();
    let (consumed, close, _) = c
        .state
        .process(&c.shared, &mut c.conn, gets.as_bytes(), &mut out);
    assert!(!close);
    assert!(consumed < gets.len(), "stops once enough output is pending");
    assert_eq!(consumed % "get big\r\n".len(), 0);
    // The runtime calls again for the rest.
    let all = c.feed(gets.as_bytes());
    assert_eq!(
        all.len(),
        30 * (out.len() / (consumed / "get big\r\n".len()))
    );
}

/// memcached requests run through the command path (`command::call`): they become the
/// connection's last command under their mapped entry's name, and its checks apply to them
/// (a memcached connection is never unauthenticated today; here one is made so to show it).
#[test]
fn requests_go_through_the_command_path() {
    let mut c = Conn::new();
    c.send("get a b\r\n");
    assert_eq!(c.conn.last_command, "mget");
    c.send("gats 0 a\r\n");
    assert_eq!(c.conn.last_command, "gat");
    let config = Config::from_args(["cairn-server", "--requirepass", "pw"]).expect("config");
    let mut locked = Conn::with(Shared::new(config));
    locked.conn.authenticated = false;
    assert_eq!(
        locked.send("set k 0 0 1\r\nv\r\nmn\r\n"),
        "SERVER_ERROR NOAUTH Authentication required.\r\n\
         SERVER_ERROR NOAUTH Authentication required.\r\n"
    );
    locked.conn.authenticated = true;
    assert_eq!(locked.send("get k\r\n"), "END\r\n");
}
