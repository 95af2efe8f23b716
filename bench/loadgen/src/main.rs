//! cairn-bench: a closed- and open-loop load generator for RESP and memcached text.
//!
//! See `bench/README.md` for the suites built on it. One run prints one JSON
//! object (throughput, errors, HDR latency percentiles) on stdout, or writes it
//! to `--json FILE`, and a one-line human summary on stderr.

mod dist;
mod json;
mod proto;
mod stats;
mod worker;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use clap::Parser;

use dist::{DistKind, KeyDist, Pattern, Rng, ValueSize};
use proto::{Expiry, McNull, Protocol};
use stats::{summarize, Recorder, Summary};
use worker::{Config, ThreadResult};

#[derive(Parser, Debug)]
#[command(
    name = "cairn-bench",
    version,
    args_override_self = true,
    about = "Load generator for cairn, Redis and memcached (RESP and memcached text)",
    after_help = "Examples:\n  \
      cairn-bench --port 6380 -c 10 -d 10 --read-ratio 0.9 --keys 30000 --value-size 1024+-500\n  \
      cairn-bench --protocol memcache --port 11212 --ping -c 40 -d 5\n  \
      cairn-bench --port 6380 --rate 50000 -c 20 -d 10            (open loop)\n  \
      cairn-bench --port 6380 --load --keys 1000000 --value-size 32 -P 64"
)]
struct Args {
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Server port.
    #[arg(short, long)]
    port: u16,
    /// resp or memcache (memcached text protocol).
    #[arg(long, default_value = "resp")]
    protocol: Protocol,
    /// Connections in all.
    #[arg(short = 'c', long, default_value_t = 10)]
    connections: usize,
    /// Load threads (connections are spread over them).
    #[arg(short = 't', long, default_value_t = 1)]
    threads: usize,
    /// Requests kept outstanding per connection (closed loop).
    #[arg(short = 'P', long, default_value_t = 1)]
    pipeline: usize,
    /// Measured seconds (after the warm-up). Ignored with --requests or --load.
    #[arg(short = 'd', long, default_value_t = 10.0)]
    duration: f64,
    /// Total requests instead of a duration.
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// Seconds run before measuring starts (duration runs only).
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Open loop: total requests per second, latency counted from each
    /// request's intended send time.
    #[arg(long)]
    rate: Option<f64>,
    /// Fraction of requests that are reads (GET); the rest are writes (SET).
    #[arg(long, default_value_t = 0.9)]
    read_ratio: f64,
    /// Null transactions only: PING (RESP), mn or version (memcached).
    #[arg(long)]
    ping: bool,
    /// The memcached null transaction: mn or version.
    #[arg(long, default_value = "mn")]
    mc_null: McNull,
    /// Number of distinct keys.
    #[arg(short = 'k', long, default_value_t = 100_000)]
    keys: u64,
    /// Key length in bytes (prefix plus zero-padded index).
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// Key distribution: uniform, zipf, scan (zipf with a sequential scan of every key) or
    /// loop (zipf with a loop over the coldest --loop-keys keys).
    #[arg(long, default_value = "uniform")]
    dist: DistKind,
    /// scan and loop: fraction of the requests that come from the scan or the loop.
    #[arg(long, default_value_t = 0.25)]
    pattern_share: f64,
    /// loop: keys in the loop (0: 15% of --keys).
    #[arg(long, default_value_t = 0)]
    loop_keys: u64,
    /// Zipf skew s (P(rank k) ~ k^-s).
    #[arg(long, default_value_t = 0.99)]
    zipf_s: f64,
    /// Value size: 32, 1024+-500 (also 1024±500), or 524..1524.
    #[arg(long, default_value = "32")]
    value_size: ValueSize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every key once (SET, pipelined), then stop: fills the keyspace.
    #[arg(long)]
    load: bool,
    /// After a read miss, write the key (cache-aside; for hit-ratio runs).
    #[arg(long)]
    fill_on_miss: bool,
    /// Expire written keys this many seconds after each write.
    #[arg(long, conflicts_with = "expire_at")]
    ttl: Option<u64>,
    /// Expire every written key at this Unix time (seconds): RESP EXAT,
    /// memcached absolute exptime. For "a million keys expire at once".
    #[arg(long)]
    expire_at: Option<u64>,
    /// Open loop: most requests in flight on one connection.
    #[arg(long, default_value_t = 4096)]
    max_outstanding: usize,
    /// Seconds to wait for outstanding replies after the end.
    #[arg(long, default_value_t = 5.0)]
    drain_timeout: f64,
    /// Give up (reporting the rest as unfinished) when requests are
    /// outstanding and no reply came for this many seconds.
    #[arg(long, default_value_t = 30.0)]
    idle_timeout: f64,
    /// Write the JSON report here instead of stdout.
    #[arg(long)]
    json: Option<String>,
    /// Instead of a run: write --requests key indices (u32 little-endian) drawn
    /// from --dist/--keys/--seed to FILE, exactly the keys a one-thread,
    /// one-connection, read-only run with the same seed requests (for
    /// offline cache simulation).
    #[arg(long, value_name = "FILE")]
    dump_keys: Option<String>,
    /// No human summary on stderr.
    #[arg(short, long)]
    quiet: bool,
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port}: no address"))
}

fn build_config(a: &Args) -> Result<Config, String> {
    if a.connections == 0 || a.threads == 0 || a.pipeline == 0 {
        return Err("--connections, --threads and --pipeline must be at least 1".into());
    }
    if a.keys == 0 {
        return Err("--keys must be at least 1".into());
    }
    if !(0.0..=1.0).contains(&a.read_ratio) {
        return Err("--read-ratio must be within 0..1".into());
    }
    if let Some(r) = a.rate {
        if !(r > 0.0 && r.is_finite()) {
            return Err("--rate must be positive".into());
        }
    }
    if !(a.duration.is_finite() && a.duration > 0.0) && a.requests.is_none() && !a.load {
        return Err("--duration must be positive".into());
    }
    let bounded = a.requests.is_some() || a.load;
    Ok(Config {
        addr: resolve(&a.host, a.port)?,
        protocol: a.protocol,
        connections: a.connections,
        threads: a.threads.min(a.connections),
        pipeline: a.pipeline,
        duration: (!bounded).then(|| Duration::from_secs_f64(a.duration)),
        requests: a.requests,
        warmup: if bounded {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(a.warmup.max(0.0))
        },
        rate: a.rate,
        read_ratio: a.read_ratio,
        ping: a.ping,
        mc_null: a.mc_null,
        keys: a.keys,
        key_size: a.key_size,
        key_prefix: a.key_prefix.clone(),
        dist: a.dist,
        zipf_s: a.zipf_s,
        pattern: a.pattern(),
        value_size: a.value_size,
        seed: a.seed,
        load: a.load,
        fill_on_miss: a.fill_on_miss,
        expiry: match (a.ttl, a.expire_at) {
            (Some(t), _) => Expiry::In(t),
            (None, Some(t)) => Expiry::At(t),
            (None, None) => Expiry::Never,
        },
        max_outstanding: a.max_outstanding.max(1),
        drain_timeout: Duration::from_secs_f64(a.drain_timeout.max(0.0)),
        idle_timeout: Duration::from_secs_f64(a.idle_timeout.max(0.001)),
    })
}

impl Args {
    fn pattern(&self) -> Pattern {
        Pattern {
            share: self.pattern_share,
            loop_keys: self.loop_keys,
        }
    }
}

fn dump_keys(a: &Args, path: &str) -> Result<(), String> {
    let n = a.requests.unwrap_or(1_000_000);
    if a.keys > u32::MAX as u64 {
        return Err("--dump-keys supports at most 2^32 keys".into());
    }
    let mut d = KeyDist::new(a.dist, a.keys, a.zipf_s, a.pattern());
    let mut rng = Rng::new(worker::thread_seed(a.seed, 0));
    let mut out = Vec::with_capacity(n as usize * 4);
    for _ in 0..n {
        out.extend_from_slice(&(d.sample(&mut rng) as u32).to_le_bytes());
    }
    std::fs::write(path, out).map_err(|e| format!("{path}: {e}"))
}

fn summary_json(w: &mut json::Writer, name: &str, s: &Summary) {
    w.key(name);
    w.begin_obj();
    w.field_u64("count", s.count);
    w.field_f64("min", s.min_us);
    w.field_f64("mean", s.mean_us);
    w.field_f64("p50", s.p50_us);
    w.field_f64("p90", s.p90_us);
    w.field_f64("p99", s.p99_us);
    w.field_f64("p999", s.p999_us);
    w.field_f64("p9999", s.p9999_us);
    w.field_f64("max", s.max_us);
    w.end_obj();
}

struct Outcome {
    rec: Recorder,
    elapsed_s: f64,
    unfinished: u64,
    conn_errors: u64,
    issued: u64,
    failures: Vec<String>,
}

fn run(cfg: &Config) -> Result<Outcome, String> {
    let ready = Barrier::new(cfg.threads + 1);
    let go = Barrier::new(cfg.threads + 1);
    let start = OnceLock::new();
    let results: Vec<Result<ThreadResult, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|tid| {
                let (ready, go, start) = (&ready, &go, &start);
                std::thread::Builder::new()
                    .name(format!("bench-{tid}"))
                    .spawn_scoped(s, move || worker::run_thread(cfg, tid, ready, go, start))
                    .expect("spawn")
            })
            .collect();
        ready.wait();
        let _ = start.set(Instant::now());
        go.wait();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let mut rec = Recorder::new();
    let (mut last, mut unfinished, mut conn_errors, mut issued) = (0u64, 0, 0, 0);
    let mut failures = Vec::new();
    for r in results {
        let r = r?;
        rec.merge(&r.rec);
        last = last.max(r.last_reply_ns);
        unfinished += r.unfinished;
        conn_errors += r.conn_errors;
        issued += r.issued;
        failures.extend(r.failures);
    }
    let measured_from = cfg.warmup.as_nanos() as u64;
    let elapsed_ns = last.saturating_sub(measured_from).max(1);
    Ok(Outcome {
        rec,
        elapsed_s: elapsed_ns as f64 / 1e9,
        unfinished,
        conn_errors,
        issued,
        failures,
    })
}

fn report(a: &Args, cfg: &Config, o: &Outcome) -> String {
    let c = &o.rec.counters;
    let mut w = json::Writer::new();
    w.begin_obj();
    w.key("config");
    w.begin_obj();
    w.field_str("addr", &cfg.addr.to_string());
    w.field_str("protocol", &cfg.protocol.to_string());
    w.field_u64("connections", cfg.connections as u64);
    w.field_u64("threads", cfg.threads as u64);
    w.field_u64("pipeline", cfg.pipeline as u64);
    w.field_str("mode", if cfg.rate.is_some() { "open" } else { "closed" });
    match cfg.rate {
        Some(r) => w.field_f64("rate", r),
        None => w.field_null("rate"),
    }
    match cfg.duration {
        Some(d) => w.field_f64("duration", d.as_secs_f64()),
        None => w.field_null("duration"),
    }
    match cfg.requests {
        Some(n) => w.field_u64("requests", n),
        None => w.field_null("requests"),
    }
    w.field_f64("warmup", cfg.warmup.as_secs_f64());
    w.field_str(
        "workload",
        if cfg.ping {
            "ping"
        } else if cfg.load {
            "load"
        } else {
            "mix"
        },
    );
    w.field_f64("read_ratio", cfg.read_ratio);
    w.field_u64("keys", cfg.keys);
    w.field_u64("key_size", cfg.key_size as u64);
    w.field_str("dist", &cfg.dist.to_string());
    w.field_f64("zipf_s", cfg.zipf_s);
    w.field_f64("pattern_share", cfg.pattern.share);
    w.field_u64("loop_keys", cfg.pattern.loop_keys);
    w.field_str("value_size", &cfg.value_size.to_string());
    w.field_u64("seed", cfg.seed);
    w.field_bool("fill_on_miss", cfg.fill_on_miss);
    w.end_obj();
    w.field_u64("ops", c.ops);
    w.field_f64("elapsed_s", o.elapsed_s);
    w.field_f64("throughput", c.ops as f64 / o.elapsed_s);
    w.field_u64("issued", o.issued);
    w.field_u64("gets", c.gets);
    w.field_u64("sets", c.sets);
    w.field_u64("nulls", c.nulls);
    w.field_u64("hits", c.hits);
    w.field_u64("misses", c.misses);
    if c.gets > 0 {
        w.field_f64("hit_ratio", c.hits as f64 / c.gets as f64);
    } else {
        w.field_null("hit_ratio");
    }
    w.field_u64("errors", c.errors);
    w.field_u64("conn_errors", o.conn_errors);
    w.field_u64("unfinished", o.unfinished);
    w.field_u64("bytes_out", c.bytes_out);
    w.field_u64("bytes_in", c.bytes_in);
    w.key("error_samples");
    w.begin_arr();
    for e in o.rec.error_samples.iter().chain(&o.failures) {
        w.str(e);
    }
    w.end_arr();
    summary_json(&mut w, "latency_us", &summarize(&o.rec.all));
    summary_json(&mut w, "get_latency_us", &summarize(&o.rec.get));
    summary_json(&mut w, "set_latency_us", &summarize(&o.rec.set));
    if cfg.rate.is_some() {
        summary_json(&mut w, "send_lag_us", &summarize(&o.rec.lag));
    }
    let _ = a;
    w.end_obj();
    w.finish()
}

fn main() {
    let a = Args::parse();
    if let Some(path) = &a.dump_keys {
        if let Err(e) = dump_keys(&a, path) {
            eprintln!("cairn-bench: {e}");
            std::process::exit(2);
        }
        return;
    }
    let cfg = match build_config(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cairn-bench: {e}");
            std::process::exit(2);
        }
    };
    let outcome = match run(&cfg) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cairn-bench: {e}");
            std::process::exit(1);
        }
    };
    let text = report(&a, &cfg, &outcome);
    match &a.json {
        Some(p) => {
            if let Err(e) = std::fs::write(p, format!("{text}\n")) {
                eprintln!("cairn-bench: {p}: {e}");
                std::process::exit(1);
            }
        }
        None => println!("{text}"),
    }
    if !a.quiet {
        let c = &outcome.rec.counters;
        let s = summarize(&outcome.rec.all);
        eprintln!(
            "{} {}: {:.0} ops/s ({} ops in {:.2}s), errors {}, p50 {:.1}us p99 {:.1}us p99.9 {:.1}us max {:.1}us",
            cfg.protocol,
            cfg.addr,
            c.ops as f64 / outcome.elapsed_s,
            c.ops,
            outcome.elapsed_s,
            c.errors + outcome.conn_errors,
            s.p50_us,
            s.p99_us,
            s.p999_us,
            s.max_us
        );
    }
    if outcome.conn_errors > 0 || !outcome.failures.is_empty() {
        for f in &outcome.failures {
            eprintln!("cairn-bench: {f}");
        }
        std::process::exit(3);
    }
}
