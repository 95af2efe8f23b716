//! One load thread: an edge-triggered mio loop over its connections.
//!
//! Closed loop: each connection keeps `pipeline` requests outstanding; every
//! read event's replies are refilled with one write. Latency runs from the
//! moment a request was written to the moment its reply was read.
//!
//! Open loop: each connection has a schedule of intended send times (the
//! total rate split evenly, connections staggered). A timerfd wakes the thread
//! at the next intended time with nanosecond resolution, and latency runs from
//! the *intended* time, so a server stall that delays sending is charged to
//! the server (no coordinated omission). How late sends were is reported
//! separately as the send lag.
//!
//! Nothing is allocated per request: output and input buffers, the pending
//! queues and the key buffer live as long as the connection.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::dist::{DistKind, KeyDist, Mix, Pattern, Rng, ValueSize};
use crate::proto::{parse_reply, Encoder, Expiry, McNull, Op, Protocol, Reply};
use crate::stats::Recorder;

/// Run parameters shared by every thread.
#[derive(Clone, Debug)]
pub struct Config {
    pub addr: SocketAddr,
    pub protocol: Protocol,
    pub connections: usize,
    pub threads: usize,
    pub pipeline: usize,
    /// Measured duration; `None` when a request count bounds the run.
    pub duration: Option<Duration>,
    /// Total requests over all connections.
    pub requests: Option<u64>,
    pub warmup: Duration,
    /// Open loop: total requests per second.
    pub rate: Option<f64>,
    pub read_ratio: f64,
    pub ping: bool,
    pub mc_null: McNull,
    pub keys: u64,
    pub key_size: usize,
    pub key_prefix: String,
    pub dist: DistKind,
    pub zipf_s: f64,
    /// What the scan and loop distributions mix in.
    pub pattern: Pattern,
    pub value_size: ValueSize,
    pub seed: u64,
    /// Write every key exactly once, then stop.
    pub load: bool,
    /// After a read miss, write that key (cache-aside).
    pub fill_on_miss: bool,
    pub expiry: Expiry,
    /// Open loop: most requests in flight on one connection.
    pub max_outstanding: usize,
    pub drain_timeout: Duration,
    /// Give up when requests are outstanding and no reply came for this long.
    pub idle_timeout: Duration,
}

impl Config {
    /// Requests connection `g` (of all connections) may send; `u64::MAX` if unbounded.
    pub fn quota(&self, g: usize) -> u64 {
        let c = self.connections as u64;
        let g = g as u64;
        if self.load {
            // Keys g, g + c, g + 2c, ... below `keys`.
            return if g < self.keys {
                (self.keys - g).div_ceil(c)
            } else {
                0
            };
        }
        match self.requests {
            Some(n) => n / c + u64::from(g < n % c),
            None => u64::MAX,
        }
    }
}

/// The RNG seed of load thread `tid` (`--dump-keys` uses thread 0's, so a
/// one-connection read-only run requests exactly the dumped keys).
pub fn thread_seed(seed: u64, tid: usize) -> u64 {
    seed ^ (tid as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Fixed-width keys: the prefix, then the index zero-padded to `key_size`.
pub struct KeyFormat {
    buf: Vec<u8>,
    digits_at: usize,
}

impl KeyFormat {
    pub fn new(prefix: &str, key_size: usize, keys: u64) -> Result<KeyFormat, String> {
        let needed = keys.saturating_sub(1).max(1).ilog10() as usize + 1;
        if prefix.len() + needed > key_size {
            return Err(format!(
                "--key-size {key_size} is too small for prefix {prefix:?} and {keys} keys \
                 (need {})",
                prefix.len() + needed
            ));
        }
        if key_size > 250 {
            return Err("--key-size above 250 (memcached's limit)".into());
        }
        let mut buf = vec![b'0'; key_size];
        buf[..prefix.len()].copy_from_slice(prefix.as_bytes());
        Ok(KeyFormat {
            buf,
            digits_at: prefix.len(),
        })
    }

    #[inline]
    pub fn key(&mut self, mut idx: u64) -> &[u8] {
        let digits = &mut self.buf[self.digits_at..];
        for d in digits.iter_mut().rev() {
            *d = b'0' + (idx % 10) as u8;
            idx /= 10;
        }
        &self.buf
    }
}

/// Value bytes: one buffer as large as the largest value; a value of size s is
/// its first s bytes.
pub fn value_buffer(max: usize) -> Vec<u8> {
    (0..max).map(|i| b'a' + (i % 26) as u8).collect()
}

struct Pending {
    /// Send time (closed loop) or intended send time (open loop), ns.
    t: u64,
    key: u64,
    op: Op,
}

struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    out_pos: usize,
    inb: Vec<u8>,
    in_start: usize,
    in_end: usize,
    pending: VecDeque<Pending>,
    refill: VecDeque<u64>,
    issued: u64,
    quota: u64,
    /// Load mode: the next key, advancing by the number of connections.
    next_seq: u64,
    /// Open loop schedule, ns from the start.
    next_intended: f64,
    alive: bool,
}

impl Conn {
    fn done(&self, stopping: bool) -> bool {
        !self.alive || (self.pending.is_empty() && (stopping || self.issued >= self.quota))
    }
}

/// What a thread hands back.
pub struct ThreadResult {
    pub rec: Recorder,
    /// When the last reply was read, ns from the start.
    pub last_reply_ns: u64,
    /// Requests still unanswered when the drain timed out or a connection died.
    pub unfinished: u64,
    pub conn_errors: u64,
    pub issued: u64,
    pub failures: Vec<String>,
}

/// Per-thread request generator.
struct Gen {
    rng: Rng,
    dist: KeyDist,
    mix: Mix,
    vsize: ValueSize,
    keyfmt: KeyFormat,
    value: Vec<u8>,
    enc: Encoder,
    ping: bool,
    load: bool,
    stride: u64,
}

impl Gen {
    #[inline]
    fn issue(&mut self, c: &mut Conn, t: u64) {
        let (op, key) = if self.ping {
            (Op::Null, 0)
        } else if let Some(k) = c.refill.pop_front() {
            (Op::Set, k)
        } else if self.load {
            let k = c.next_seq;
            c.next_seq += self.stride;
            (Op::Set, k)
        } else if self.mix.is_read(&mut self.rng) {
            (Op::Get, self.dist.sample(&mut self.rng))
        } else {
            (Op::Set, self.dist.sample(&mut self.rng))
        };
        match op {
            Op::Null => self.enc.null(&mut c.out),
            Op::Get => {
                let k = self.keyfmt.key(key);
                self.enc.get(&mut c.out, k);
            }
            Op::Set => {
                let n = self.vsize.sample(&mut self.rng);
                let k = self.keyfmt.key(key);
                self.enc.set(&mut c.out, k, &self.value[..n]);
            }
        }
        c.pending.push_back(Pending { t, key, op });
        c.issued += 1;
    }
}

struct Clock(Instant);

impl Clock {
    #[inline]
    fn ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// A CLOCK_MONOTONIC timerfd armed with relative nanosecond timeouts.
struct Timer {
    fd: OwnedFd,
    armed_at: u64,
}

impl Timer {
    fn new() -> io::Result<Timer> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Timer {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            armed_at: u64::MAX,
        })
    }

    /// Fires at `at` (ns on `clock`); a no-op if already armed no later.
    fn arm(&mut self, at: u64, now: u64) {
        if at >= self.armed_at {
            return;
        }
        let delta = at.saturating_sub(now).max(1_000);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (delta / 1_000_000_000) as libc::time_t,
                tv_nsec: (delta % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid fd and itimerspec; errors leave the timer as it was.
        unsafe {
            libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut());
        }
        self.armed_at = at;
    }

    /// The timer went off. Its expiry count is not read: epoll reports every
    /// expiry as a new edge, and `timerfd_settime` resets the count anyway, so
    /// the read would only cost a syscall per wake-up.
    fn fired(&mut self) {
        self.armed_at = u64::MAX;
    }
}

const TIMER: Token = Token(usize::MAX - 1);
const READ_CHUNK: usize = 64 * 1024;

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(TcpStream::from_std(s))
}

/// Runs thread `tid`: connects its share of connections, waits at `ready`,
/// takes the start time from `start` after `go`, runs, and reports.
pub fn run_thread(
    cfg: &Config,
    tid: usize,
    ready: &Barrier,
    go: &Barrier,
    start: &std::sync::OnceLock<Instant>,
) -> Result<ThreadResult, String> {
    let globals: Vec<usize> = (tid..cfg.connections).step_by(cfg.threads).collect();
    let setup = || -> Result<(Poll, Vec<Conn>, Option<Timer>), String> {
        let poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
        let mut conns = Vec::with_capacity(globals.len());
        for (i, &g) in globals.iter().enumerate() {
            let mut stream = connect(cfg.addr).map_err(|e| format!("connect {}: {e}", cfg.addr))?;
            poll.registry()
                .register(
                    &mut stream,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| format!("register: {e}"))?;
            conns.push(Conn {
                stream,
                out: Vec::with_capacity(READ_CHUNK),
                out_pos: 0,
                inb: vec![0; READ_CHUNK],
                in_start: 0,
                in_end: 0,
                pending: VecDeque::with_capacity(cfg.pipeline.max(64)),
                refill: VecDeque::new(),
                issued: 0,
                quota: cfg.quota(g),
                next_seq: g as u64,
                next_intended: 0.0,
                alive: true,
            });
        }
        let timer = match cfg.rate {
            Some(_) => {
                // The default 50 us timer slack would delay every scheduled send.
                // SAFETY: PR_SET_TIMERSLACK takes a plain integer argument.
                unsafe {
                    libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
                }
                let t = Timer::new().map_err(|e| format!("timerfd: {e}"))?;
                poll.registry()
                    .register(&mut SourceFd(&t.fd.as_raw_fd()), TIMER, Interest::READABLE)
                    .map_err(|e| format!("register timer: {e}"))?;
                Some(t)
            }
            None => None,
        };
        Ok((poll, conns, timer))
    };
    let prepared = setup();
    // Every thread reaches the barriers, even after a failure, so none hangs.
    ready.wait();
    go.wait();
    let (mut poll, mut conns, mut timer) = prepared?;
    let clock = Clock(*start.get().expect("start time set before go"));

    let mut gen = Gen {
        rng: Rng::new(thread_seed(cfg.seed, tid)),
        dist: KeyDist::new(cfg.dist, cfg.keys, cfg.zipf_s, cfg.pattern),
        mix: Mix::new(cfg.read_ratio),
        vsize: cfg.value_size,
        keyfmt: KeyFormat::new(&cfg.key_prefix, cfg.key_size, cfg.keys)?,
        value: value_buffer(cfg.value_size.max),
        enc: Encoder::new(cfg.protocol, cfg.mc_null, cfg.expiry),
        ping: cfg.ping,
        load: cfg.load,
        stride: cfg.connections as u64,
    };

    // Open-loop schedule: connection g sends at offset g/rate, then every C/rate.
    let interval = cfg
        .rate
        .map(|r| cfg.connections as f64 * 1e9 / r)
        .unwrap_or(0.0);
    if let Some(rate) = cfg.rate {
        for (c, &g) in conns.iter_mut().zip(&globals) {
            c.next_intended = g as f64 * 1e9 / rate;
        }
    }

    let warm_end = cfg.warmup.as_nanos() as u64;
    let end = cfg
        .duration
        .map(|d| warm_end + d.as_nanos() as u64)
        .unwrap_or(u64::MAX);
    let drain = cfg.drain_timeout.as_nanos() as u64;
    let mut recording = warm_end == 0;
    let mut rec = Recorder::new();
    let mut failures = Vec::new();
    let mut conn_errors = 0u64;
    let mut last_reply_ns = 0u64;
    let mut stopping = false;
    let idle = cfg.idle_timeout.as_nanos() as u64;
    let mut last_progress = 0u64;
    let mut events = Events::with_capacity(1024);
    let proto = cfg.protocol;
    let open = cfg.rate.is_some();

    // Closed loop: prime every connection.
    if !open {
        let now = clock.ns();
        for c in conns.iter_mut() {
            fill_closed(&mut gen, c, cfg.pipeline, now);
            flush(c, &mut rec, &mut conn_errors, &mut failures);
        }
    }

    loop {
        let now = clock.ns();
        if !recording && now >= warm_end {
            rec.reset();
            recording = true;
        }
        if !stopping && now >= end {
            stopping = true;
        }
        let mut next_due = u64::MAX;
        if open && !stopping {
            for c in conns.iter_mut() {
                if !c.alive {
                    continue;
                }
                let mut sent = false;
                while c.issued < c.quota
                    && c.pending.len() < cfg.max_outstanding
                    && c.next_intended <= now as f64
                {
                    let intended = c.next_intended as u64;
                    gen.issue(c, intended);
                    if recording {
                        rec.record_lag(now - intended);
                    }
                    c.next_intended += interval;
                    sent = true;
                }
                if sent {
                    flush(c, &mut rec, &mut conn_errors, &mut failures);
                }
                if c.issued < c.quota && c.pending.len() < cfg.max_outstanding {
                    next_due = next_due.min(c.next_intended as u64);
                }
            }
        }
        if conns.iter().all(|c| c.done(stopping)) {
            break;
        }
        if stopping && now >= end.saturating_add(drain) {
            break;
        }
        let waiting = conns.iter().any(|c| c.alive && !c.pending.is_empty());
        if waiting && now.saturating_sub(last_progress) >= idle {
            if failures.len() < 5 {
                failures.push(format!(
                    "no reply for {:.1}s with requests outstanding: gave up",
                    idle as f64 / 1e9
                ));
            }
            break;
        }
        if !waiting {
            last_progress = now;
        }
        // How long to wait for sockets.
        let limit = if stopping {
            end.saturating_add(drain)
        } else {
            end
        };
        let limit = limit.min(last_progress.saturating_add(idle).max(now + 1_000_000));
        let mut timeout = if limit == u64::MAX {
            None
        } else {
            Some(Duration::from_nanos(limit.saturating_sub(now)))
        };
        if let (Some(t), true) = (timer.as_mut(), next_due != u64::MAX) {
            if next_due <= now {
                timeout = Some(Duration::ZERO);
            } else {
                t.arm(next_due, now);
            }
        }
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(format!("poll: {e}"));
            }
        }
        for ev in events.iter() {
            if ev.token() == TIMER {
                if let Some(t) = timer.as_mut() {
                    t.fired();
                }
                continue;
            }
            let c = &mut conns[ev.token().0];
            if !c.alive {
                continue;
            }
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                let got = read_conn(
                    c,
                    proto,
                    &clock,
                    recording,
                    cfg.fill_on_miss,
                    &mut rec,
                    &mut failures,
                );
                if got > 0 {
                    last_reply_ns = clock.ns();
                    last_progress = last_reply_ns;
                }
                if !c.alive {
                    conn_errors += 1;
                    continue;
                }
                if !open && !stopping {
                    let now = clock.ns();
                    if now >= end {
                        stopping = true;
                    } else {
                        fill_closed(&mut gen, c, cfg.pipeline, now);
                    }
                }
            }
            if c.out_pos < c.out.len() {
                flush(c, &mut rec, &mut conn_errors, &mut failures);
            }
        }
    }

    let unfinished = conns.iter().map(|c| c.pending.len() as u64).sum();
    let issued = conns.iter().map(|c| c.issued).sum();
    Ok(ThreadResult {
        rec,
        last_reply_ns,
        unfinished,
        conn_errors,
        issued,
        failures,
    })
}

#[inline]
fn fill_closed(gen: &mut Gen, c: &mut Conn, pipeline: usize, now: u64) {
    while c.pending.len() < pipeline && c.issued < c.quota {
        gen.issue(c, now);
    }
}

fn flush(c: &mut Conn, rec: &mut Recorder, conn_errors: &mut u64, failures: &mut Vec<String>) {
    while c.out_pos < c.out.len() {
        match c.stream.write(&c.out[c.out_pos..]) {
            Ok(0) => {
                kill(c, conn_errors, failures, "write returned 0".into());
                return;
            }
            Ok(n) => {
                c.out_pos += n;
                rec.counters.bytes_out += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                kill(c, conn_errors, failures, format!("write: {e}"));
                return;
            }
        }
    }
    if c.out_pos == c.out.len() {
        c.out.clear();
        c.out_pos = 0;
    }
}

fn kill(c: &mut Conn, conn_errors: &mut u64, failures: &mut Vec<String>, why: String) {
    if c.alive {
        c.alive = false;
        *conn_errors += 1;
        if failures.len() < 5 {
            failures.push(why);
        }
    }
}

/// Reads what is there and consumes every complete reply; returns how many.
#[allow(clippy::too_many_arguments)]
fn read_conn(
    c: &mut Conn,
    proto: Protocol,
    clock: &Clock,
    recording: bool,
    fill_on_miss: bool,
    rec: &mut Recorder,
    failures: &mut Vec<String>,
) -> u64 {
    let mut replies = 0;
    loop {
        if c.in_end == c.inb.len() {
            if c.in_start > 0 {
                c.inb.copy_within(c.in_start..c.in_end, 0);
                c.in_end -= c.in_start;
                c.in_start = 0;
            } else {
                let n = c.inb.len() * 2;
                c.inb.resize(n, 0);
            }
        }
        match c.stream.read(&mut c.inb[c.in_end..]) {
            Ok(0) => {
                // Not counted here: the caller counts dead connections once.
                c.alive = false;
                if failures.len() < 5 {
                    failures.push("server closed the connection".into());
                }
                return replies;
            }
            Ok(n) => {
                rec.counters.bytes_in += n as u64;
                c.in_end += n;
                let short = c.in_end < c.inb.len();
                let now = clock.ns();
                while let Some(p) = c.pending.front() {
                    let buf = &c.inb[c.in_start..c.in_end];
                    match parse_reply(proto, p.op, buf) {
                        Ok(Some((reply, used))) => {
                            if recording {
                                rec.record(p.op, reply, now.saturating_sub(p.t));
                                if reply == Reply::Error {
                                    rec.sample_error(&buf[..used]);
                                }
                            }
                            if reply == Reply::Miss && fill_on_miss {
                                c.refill.push_back(p.key);
                            }
                            c.in_start += used;
                            c.pending.pop_front();
                            replies += 1;
                        }
                        Ok(None) => break,
                        Err(e) => {
                            c.alive = false;
                            if failures.len() < 5 {
                                failures.push(format!("protocol error: {e}"));
                            }
                            return replies;
                        }
                    }
                }
                if c.pending.is_empty() && c.in_start < c.in_end {
                    c.alive = false;
                    if failures.len() < 5 {
                        failures.push("reply without a request".into());
                    }
                    return replies;
                }
                if c.in_start == c.in_end {
                    c.in_start = 0;
                    c.in_end = 0;
                }
                if short {
                    return replies;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return replies,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                c.alive = false;
                if failures.len() < 5 {
                    failures.push(format!("read: {e}"));
                }
                return replies;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config {
            addr: "127.0.0.1:1".parse().unwrap(),
            protocol: Protocol::Resp,
            connections: 3,
            threads: 1,
            pipeline: 1,
            duration: None,
            requests: Some(10),
            warmup: Duration::ZERO,
            rate: None,
            read_ratio: 0.9,
            ping: false,
            mc_null: McNull::Mn,
            keys: 8,
            key_size: 16,
            key_prefix: "key:".into(),
            dist: DistKind::Uniform,
            zipf_s: 0.99,
            pattern: Pattern::default(),
            value_size: ValueSize { min: 4, max: 4 },
            seed: 1,
            load: false,
            fill_on_miss: false,
            expiry: Expiry::Never,
            max_outstanding: 1024,
            drain_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn request_quotas_split_the_total_exactly() {
        let c = cfg();
        let q: Vec<u64> = (0..3).map(|g| c.quota(g)).collect();
        assert_eq!(q, vec![4, 3, 3]);
        assert_eq!(q.iter().sum::<u64>(), 10);
        let mut unbounded = cfg();
        unbounded.requests = None;
        assert_eq!(unbounded.quota(0), u64::MAX);
    }

    #[test]
    fn load_mode_writes_every_key_exactly_once() {
        let mut c = cfg();
        c.load = true;
        for conns in 1..6 {
            c.connections = conns;
            let mut seen = vec![0u32; c.keys as usize];
            for g in 0..conns {
                let mut k = g as u64;
                for _ in 0..c.quota(g) {
                    seen[k as usize] += 1;
                    k += conns as u64;
                }
            }
            assert!(
                seen.iter().all(|&n| n == 1),
                "{conns} connections: {seen:?}"
            );
        }
        c.keys = 2;
        c.connections = 4;
        assert_eq!(c.quota(3), 0);
    }

    #[test]
    fn keys_are_fixed_width_and_distinct() {
        let mut f = KeyFormat::new("key:", 16, 1_000_000).unwrap();
        assert_eq!(f.key(0), b"key:000000000000");
        assert_eq!(f.key(42), b"key:000000000042");
        assert_eq!(f.key(999_999), b"key:000000999999");
        let mut tight = KeyFormat::new("k", 4, 1000).unwrap();
        assert_eq!(tight.key(999), b"k999");
        assert!(KeyFormat::new("k", 3, 1000).is_err());
        assert!(KeyFormat::new("key:", 300, 10).is_err());
    }

    #[test]
    fn generator_respects_mix_ping_load_and_refill() {
        let c = cfg();
        let mut g = Gen {
            rng: Rng::new(1),
            dist: KeyDist::new(DistKind::Uniform, 8, 0.0, Pattern::default()),
            mix: Mix::new(0.5),
            vsize: ValueSize { min: 3, max: 3 },
            keyfmt: KeyFormat::new("k", 4, 8).unwrap(),
            value: value_buffer(3),
            enc: Encoder::new(Protocol::Memcache, McNull::Mn, Expiry::Never),
            ping: false,
            load: false,
            stride: 1,
        };
        let stream = {
            // A connected pair so that Conn has a real stream; nothing is sent.
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            TcpStream::from_std(s)
        };
        let mut conn = Conn {
            stream,
            out: Vec::new(),
            out_pos: 0,
            inb: vec![0; 16],
            in_start: 0,
            in_end: 0,
            pending: VecDeque::new(),
            refill: VecDeque::from(vec![5]),
            issued: 0,
            quota: c.quota(0),
            next_seq: 0,
            next_intended: 0.0,
            alive: true,
        };
        g.issue(&mut conn, 7);
        assert_eq!(conn.out, b"set k005 0 0 3\r\nabc\r\n", "refill goes first");
        assert_eq!(conn.pending[0].op, Op::Set);
        assert_eq!(conn.pending[0].t, 7);
        for _ in 0..1000 {
            g.issue(&mut conn, 0);
        }
        let gets = conn.pending.iter().filter(|p| p.op == Op::Get).count();
        assert!((400..600).contains(&gets), "{gets}");
        g.ping = true;
        conn.out.clear();
        g.issue(&mut conn, 0);
        assert_eq!(conn.out, b"mn\r\n");
        g.ping = false;
        g.load = true;
        g.stride = 3;
        conn.out.clear();
        g.issue(&mut conn, 0);
        g.issue(&mut conn, 0);
        assert_eq!(
            conn.out,
            b"set k000 0 0 3\r\nabc\r\nset k003 0 0 3\r\nabc\r\n"
        );
    }
}
