//! Unit tests of the configuration: parsers, the command line and the file, and table-wide
//! checks that every setting has its flag, file key, CONFIG entry, README line and round trip.

use super::*;
use std::io::Write;

fn cfg(args: &[&str]) -> Config {
    let mut v = vec!["cairn-server"];
    v.extend_from_slice(args);
    Config::from_args(v).unwrap()
}

fn temp_file(contents: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path =
        std::env::temp_dir().join(format!("cairn-config-test-{}-{n}.toml", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(contents.as_bytes()).unwrap();
    path
}

#[test]
fn sizes() {
    assert_eq!(parse_size("1024"), Ok(1024));
    assert_eq!(parse_size("0"), Ok(0));
    assert_eq!(parse_size("100k"), Ok(100 * 1024));
    assert_eq!(parse_size("100KB"), Ok(100 * 1024));
    assert_eq!(parse_size("64mb"), Ok(64 << 20));
    assert_eq!(parse_size("64M"), Ok(64 << 20));
    assert_eq!(parse_size("2gb"), Ok(2 << 30));
    assert_eq!(parse_size("2Gb"), Ok(2 << 30));
    assert_eq!(parse_size("7b"), Ok(7));
    assert_eq!(parse_size(" 3 mb "), Ok(3 << 20));
    assert!(parse_size("").is_err());
    assert!(parse_size("mb").is_err());
    assert!(parse_size("-1").is_err());
    assert!(parse_size("1.5gb").is_err());
    assert!(parse_size("12xb").is_err());
    assert!(parse_size("99999999999999999999").is_err());
    assert!(parse_size("99999999999gb").is_err());
}

#[test]
fn defaults() {
    let c = cfg(&[]);
    assert_eq!(c.bind, "127.0.0.1");
    assert_eq!(c.port, 6380);
    assert_eq!(c.memcache_port, 11212);
    assert!(!c.memcache_port_explicit);
    assert!(c.memcache_tcp_enabled());
    assert_eq!(c.io_model, IoModel::Reactor);
    assert!(c.threads >= 1 && c.workers >= 1);
    assert_eq!(c.maxmemory, 0);
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::AllKeysLru);
    assert_eq!(c.maxclients, 10000);
    assert_eq!(c.requirepass, None);
    assert_eq!(c.loglevel, "info");
    assert_eq!(c.max_value_size, 64 << 20);
    assert_eq!(c.client_query_buffer_limit, 1 << 30);
    assert_eq!(c.client_output_limits, OutputLimits::default());
    assert_eq!(
        c.client_output_limits.render(),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    assert_eq!(c.unixsocketperm, None);
}

#[test]
fn flags() {
    let c = cfg(&[
        "--port",
        "7000",
        "--maxmemory",
        "2GB",
        "--maxmemory-policy",
        "allkeys-lru",
        "--io-model",
        "dispatch",
        "--threads",
        "3",
        "--workers=5",
        "--unixsocketperm",
        "0770",
        "--loglevel",
        "WARNING",
        "--requirepass",
        "s3cret",
    ]);
    assert_eq!(c.port, 7000);
    assert_eq!(c.maxmemory, 2 << 30);
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::AllKeysLru);
    assert_eq!(c.io_model, IoModel::Dispatch);
    assert_eq!(c.threads, 3);
    assert_eq!(c.workers, 5);
    assert_eq!(c.unixsocketperm, Some(0o770));
    assert_eq!(c.loglevel, "warning");
    assert_eq!(c.requirepass.as_deref(), Some("s3cret"));
    // requirepass without an explicit memcache port turns the memcached TCP listener off.
    assert!(!c.memcache_tcp_enabled());
    let c = cfg(&["--requirepass", "x", "--memcache-port", "11212"]);
    assert!(c.memcache_port_explicit);
    assert!(c.memcache_tcp_enabled());
    let c = cfg(&["--port", "1", "--port", "2"]);
    assert_eq!(c.port, 2);
    assert_eq!(cfg(&["--requirepass", ""]).requirepass, None);
}

#[test]
fn bad_flags() {
    for bad in [
        &["--threads", "0"][..],
        &["--maxclients", "0"],
        &["--maxclients", "4294967296"],
        &["--max-value-size", "0"],
        &["--client-query-buffer-limit", "1000"],
        &["--maxmemory", "lots"],
        &["--maxmemory-policy", "volatile-lruu"],
        &["--unixsocketperm", "999"],
        &["--loglevel", "chatty"],
        &["--port", "70000"],
        &["--io-model", "uring"],
        &["--nope"],
    ] {
        let mut v = vec!["cairn-server"];
        v.extend_from_slice(bad);
        assert!(Config::from_args(v).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn file_and_flag_precedence() {
    let path = temp_file(
        "port = 7001\nmaxmemory = \"100mb\"\nmaxmemory_policy = \"evict\"\n\
         max-value-size = \"1mb\"\nmemcache_port = 11300\nunixsocketperm = 700\n\
         requirepass = \"pw\"\nthreads = 2\n",
    );
    let p = path.to_str().unwrap();
    let c = cfg(&["--config", p]);
    assert_eq!(c.config_file.as_deref(), Some(path.as_path()));
    assert_eq!(c.port, 7001);
    assert_eq!(c.maxmemory, 100 << 20);
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::AllKeysLru);
    assert_eq!(c.max_value_size, 1 << 20);
    assert_eq!(c.memcache_port, 11300);
    assert!(c.memcache_port_explicit);
    assert!(c.memcache_tcp_enabled());
    assert_eq!(c.unixsocketperm, Some(0o700));
    assert_eq!(c.threads, 2);
    // Flags win over the file, wherever they appear.
    let c = cfg(&[
        "--port",
        "7002",
        "--config",
        p,
        "--maxmemory",
        "1gb",
        "--threads=4",
    ]);
    assert_eq!(c.port, 7002);
    assert_eq!(c.maxmemory, 1 << 30);
    assert_eq!(c.threads, 4);
    assert_eq!(c.max_value_size, 1 << 20);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn bad_files() {
    for text in [
        "nosuchkey = 1\n",
        "config = \"other.toml\"\n",
        "port = \"notaport\"\n",
        "port = [1, 2]\n",
        "this is not toml\n",
    ] {
        let path = temp_file(text);
        let r = Config::from_args(["cairn-server", "--config", path.to_str().unwrap()]);
        std::fs::remove_file(&path).unwrap();
        match r {
            Err(ConfigError::File(msg)) => assert!(msg.contains("config file"), "{msg}"),
            other => panic!("{text:?}: {other:?}"),
        }
    }
    let r = Config::from_args(["cairn-server", "--config", "/nonexistent/cairn.toml"]);
    assert!(matches!(r, Err(ConfigError::File(_))));
}

#[test]
fn loglevels() {
    use tracing::level_filters::LevelFilter;
    assert_eq!(
        cfg(&["--loglevel", "debug"]).level_filter(),
        LevelFilter::DEBUG
    );
    assert_eq!(
        cfg(&["--loglevel", "verbose"]).level_filter(),
        LevelFilter::DEBUG
    );
    assert_eq!(
        cfg(&["--loglevel", "notice"]).level_filter(),
        LevelFilter::INFO
    );
    assert_eq!(
        cfg(&["--loglevel", "warning"]).level_filter(),
        LevelFilter::WARN
    );
    assert_eq!(
        cfg(&["--loglevel", "nothing"]).level_filter(),
        LevelFilter::OFF
    );
}

#[test]
fn help_and_version() {
    let e = Config::from_args(["cairn-server", "--version"]).unwrap_err();
    assert!(
        matches!(&e, ConfigError::Args(e) if e.kind() == clap::error::ErrorKind::DisplayVersion)
    );
    let e = Config::from_args(["cairn-server", "--help"]).unwrap_err();
    assert!(matches!(&e, ConfigError::Args(e) if e.kind() == clap::error::ErrorKind::DisplayHelp));
}

#[test]
fn output_buffer_limits() {
    let c = cfg(&[
        "--client-output-buffer-limit",
        "pubsub 1mb 512k 5 normal 10 0 0",
    ]);
    let l = c.client_output_limits;
    assert_eq!(
        (l.pubsub.hard, l.pubsub.soft, l.pubsub.soft_secs),
        (1 << 20, 512 << 10, 5)
    );
    assert_eq!(l.normal.hard, 10);
    assert_eq!(l.replica, OutputLimits::default().replica);
    // The old flag sets the normal class's hard limit.
    let c = cfg(&["--client-output-limit", "1mb"]);
    assert_eq!(c.client_output_limits.normal.hard, 1 << 20);
    assert_eq!(
        c.client_output_limits.pubsub,
        OutputLimits::default().pubsub
    );
    let mut l = OutputLimits::default();
    for bad in ["normal 1 2", "bogus 1 2 3", "normal x 0 0", "normal 1 1 -1"] {
        assert!(l.update(bad).is_err(), "{bad} accepted");
    }
    assert_eq!(l, OutputLimits::default());
    let bad = ["cairn-server", "--client-output-buffer-limit", "normal 1"];
    assert!(Config::from_args(bad).is_err());
}
