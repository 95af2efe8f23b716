//! Table-wide tests: they iterate over [`SETTINGS`], so a new setting cannot miss its flag,
//! file key, CONFIG GET entry, round trip, README line or sample; and CONFIG SET / REWRITE.

use super::rewrite::rewrite_text;
use super::table::{DefaultValue, SETTINGS};
use super::*;

/// A non-default value for every setting (with how it renders). A new setting needs one here.
const SAMPLES: &[(&str, &str, &str)] = &[
    ("bind", "0.0.0.0 ::1", "0.0.0.0 ::1"),
    ("port", "7001", "7001"),
    ("unixsocket", "/tmp/cairn test.sock", "/tmp/cairn test.sock"),
    ("unixsocketperm", "0770", "770"),
    ("memcache-port", "11300", "11300"),
    ("memcache-unixsocket", "/tmp/mc.sock", "/tmp/mc.sock"),
    ("threads", "3", "3"),
    ("io-model", "dispatch", "dispatch"),
    ("workers", "5", "5"),
    ("maxmemory", "2gb", "2147483648"),
    ("maxmemory-policy", "noeviction", "noeviction"),
    ("cas", "no", "no"),
    ("maxclients", "77", "77"),
    ("requirepass", "p\"w \\ #", "p\"w \\ #"),
    ("loglevel", "WARN", "warning"),
    ("log-format", "JSON", "json"),
    ("logfile", "/var/log/cairn.log", "/var/log/cairn.log"),
    ("metrics-port", "9121", "9121"),
    ("metrics-bind", "0.0.0.0", "0.0.0.0"),
    ("max-value-size", "1mb", "1048576"),
    ("client-query-buffer-limit", "2mb", "2097152"),
    (
        "client-output-buffer-limit",
        "pubsub 1mb 512k 5",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 5",
    ),
    ("client-output-limit", "10k", "10240"),
    ("max-tags-per-record", "7", "7"),
    ("tracking-table-max-keys", "99", "99"),
    ("changes-backlog-size", "4mb", "4194304"),
    ("sql-timeout", "250ms", "250ms"),
    ("sql-max-result", "1mb", "1048576"),
    ("sql-maxmemory", "3mb", "3145728"),
    ("sql-inline-steps", "50", "50"),
    ("busy-reply-threshold", "250", "250"),
    ("hash-max-listpack-entries", "100", "100"),
    ("hash-max-listpack-value", "32", "32"),
    ("set-max-intset-entries", "100", "100"),
    ("set-max-listpack-entries", "100", "100"),
    ("set-max-listpack-value", "32", "32"),
    ("zset-max-listpack-entries", "100", "100"),
    ("zset-max-listpack-value", "32", "32"),
    ("list-max-listpack-size", "-3", "-3"),
    ("slowlog-log-slower-than", "-1", "-1"),
    ("slowlog-max-len", "5", "5"),
    ("latency-monitor-threshold", "100", "100"),
    // Settings that take one value only: the sample is that value.
    ("databases", "1", "1"),
    ("dir", "/tmp/cairn dir", "/tmp/cairn dir"),
    ("dbfilename", "snap.cairn", "snap.cairn"),
    ("save", "900  1 60 10000", "900 1 60 10000"),
    ("save-on-shutdown", "NO", "no"),
    ("stop-writes-on-bgsave-error", "no", "no"),
    ("load-damaged", "skip", "skip"),
    ("rdb-key-save-delay", "10", "10"),
    ("key-load-delay", "5", "5"),
    ("appendonly", "no", "no"),
    ("wb-fsync", "always", "always"),
    ("wb-max-bytes", "1mb", "1048576"),
    ("wb-on-full", "block", "block"),
    ("replicaof", "10.0.0.1  6379", "10.0.0.1 6379"),
    ("masterauth", "secret", "secret"),
    ("masteruser", "repl", "repl"),
    ("replica-read-only", "no", "no"),
    ("replica-serve-stale-data", "NO", "no"),
    ("min-replicas-to-write", "2", "2"),
    ("min-replicas-max-lag", "5", "5"),
    ("repl-backlog-size", "2mb", "2097152"),
    ("repl-send-delay-us", "500", "500"),
    ("repl-ping-replica-period", "3", "3"),
    ("repl-timeout", "30", "30"),
    ("replica-priority", "0", "0"),
    ("replica-announce-ip", "10.0.0.7", "10.0.0.7"),
    ("replica-announce-port", "7001", "7001"),
];

fn sample(name: &str) -> (&'static str, &'static str) {
    let (_, text, rendered) = SAMPLES
        .iter()
        .find(|(n, ..)| *n == name)
        .unwrap_or_else(|| panic!("setting {name} has no sample in SAMPLES"));
    (text, rendered)
}

fn settings_for(config: &Config) -> Settings {
    let store = store::Store::new(store::StoreConfig {
        maxmemory: config.maxmemory,
        policy: config.maxmemory_policy,
        ..store::StoreConfig::default()
    });
    let writeback = writeback::Engine::new(writeback::EngineSettings {
        dir: config.persist.dir.clone(),
        fsync: config.wb_fsync,
        max_bytes: config.wb_max_bytes,
        on_full: config.wb_on_full,
    });
    Settings::new(config, store, writeback)
}

fn render(config: &Config, name: &str) -> String {
    (table::lookup(name).unwrap().render)(config)
}

#[test]
fn names_are_unique_lowercase_and_every_setting_has_a_sample() {
    for (i, s) in SETTINGS.iter().enumerate() {
        assert_eq!(s.name, s.name.to_ascii_lowercase());
        assert!(!s.name.contains('_'), "{}: file keys map _ to -", s.name);
        assert!(SETTINGS[..i].iter().all(|o| o.name != s.name), "{}", s.name);
        sample(s.name);
        if let DefaultValue::PartOf(of) = s.default {
            let target = SETTINGS.iter().position(|o| o.name == of);
            assert!(target.is_some_and(|t| t < i), "{} must follow {of}", s.name);
        }
    }
    assert_eq!(SAMPLES.len(), SETTINGS.len(), "a sample names no setting");
}

#[test]
fn defaults_and_samples_round_trip_through_parse_and_render() {
    let defaults = Config::defaults();
    for s in SETTINGS {
        let (text, rendered) = sample(s.name);
        let mut c = Config::defaults();
        (s.parse)(&mut c, text).unwrap_or_else(|e| panic!("{}: {e}", s.name));
        assert_eq!((s.render)(&c), rendered, "{}", s.name);
        // What is rendered parses back to the same value.
        let mut again = Config::defaults();
        (s.parse)(&mut again, rendered).unwrap();
        assert_eq!((s.render)(&again), rendered, "{}", s.name);
        let shown = (s.render)(&defaults);
        let mut d = Config::defaults();
        (s.parse)(&mut d, &shown).unwrap_or_else(|e| panic!("{} default: {e}", s.name));
        assert_eq!((s.render)(&d), shown, "{}", s.name);
        if !["databases", "save", "appendonly"].contains(&s.name) {
            assert_ne!(
                rendered, shown,
                "{}: the sample must not be the default",
                s.name
            );
        }
    }
}

#[test]
fn every_setting_has_a_flag_and_a_file_key() {
    let help = Config::help();
    for s in SETTINGS {
        assert!(
            help.contains(&format!("--{} <", s.name)),
            "--{} not in --help",
            s.name
        );
        let (text, rendered) = sample(s.name);
        let flag = format!("--{}={text}", s.name);
        let from_flag =
            Config::from_args(["cairn-server", &flag]).unwrap_or_else(|e| panic!("{flag}: {e}"));
        assert_eq!(render(&from_flag, s.name), rendered, "{flag}");
        for key in [s.name.to_string(), s.name.replace('-', "_")] {
            let file = super::load::parse_file(&format!("{key} = {text:?}\n"))
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(file.0, vec![(s.name, text.to_string())]);
        }
    }
}

#[test]
fn every_setting_has_a_config_get_entry_and_only_mutable_ones_set() {
    let settings = settings_for(&Config::defaults());
    let all = settings.get(&[b"*".to_vec()]);
    let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
    // Every setting in table order, then the aliases (as Redis lists `lua-time-limit` too).
    let table: Vec<&str> = SETTINGS
        .iter()
        .map(|s| s.name)
        .chain(super::table::ALIASES.iter().map(|(alias, _)| *alias))
        .collect();
    assert_eq!(names, table);
    for (alias, name) in super::table::ALIASES {
        let (text, rendered) = sample(name);
        settings
            .set(&[(alias.as_bytes(), text.as_bytes())])
            .unwrap_or_else(|e| panic!("{alias}: {e}"));
        assert_eq!(
            settings.get(&[alias.as_bytes().to_vec(), name.as_bytes().to_vec()]),
            vec![
                (*name, rendered.to_string()),
                (*alias, rendered.to_string())
            ]
        );
    }
    for s in SETTINGS {
        let (text, rendered) = sample(s.name);
        let result = settings.set(&[(s.name.as_bytes(), text.as_bytes())]);
        if s.mutable() {
            result.unwrap_or_else(|e| panic!("{e}"));
            let got = settings.get(&[s.name.as_bytes().to_vec()]);
            assert_eq!(got, vec![(s.name, rendered.to_string())]);
        } else {
            assert_eq!(
                result.unwrap_err().to_string(),
                format!(
                    "ERR CONFIG SET failed (possibly related to argument '{}') - can't set immutable config",
                    s.name
                )
            );
        }
    }
    // The settings the rest of the server reads directly follow.
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(settings.maxclients.load(Relaxed), 77);
    assert_eq!(settings.slowlog_log_slower_than.load(Relaxed), -1);
    assert_eq!(settings.slowlog_max_len.load(Relaxed), 5);
    assert_eq!(settings.latency_monitor_threshold.load(Relaxed), 100);
    assert_eq!(settings.store().maxmemory(), 2 << 30);
    assert!(!settings.store().evicts());
    assert!(settings.password_matches(b"p\"w \\ #"));
    // Glob patterns, case-insensitive names.
    let got = settings.get(&[b"slowlog-*".to_vec(), b"slowlog-max-len".to_vec()]);
    assert_eq!(
        got,
        vec![
            ("slowlog-log-slower-than", "-1".to_string()),
            ("slowlog-max-len", "5".to_string())
        ]
    );
    assert!(settings.set(&[(b"MAXCLIENTS", b"78")]).is_ok());
}

#[test]
fn config_set_of_several_parameters_is_all_or_nothing() {
    let settings = settings_for(&Config::defaults());
    let before = settings.current();
    let bad = settings.set(&[(b"maxclients", b"50"), (b"max-value-size", b"0")]);
    assert!(matches!(&bad, Err(SetError::Failed { name, .. }) if name == "max-value-size"));
    let unknown = settings.set(&[(b"maxclients", b"50"), (b"nosuch", b"1")]);
    assert_eq!(
        unknown.unwrap_err().to_string(),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    let duplicate = settings.set(&[(b"maxclients", b"50"), (b"maxclients", b"60")]);
    assert_eq!(
        duplicate.unwrap_err().to_string(),
        "ERR CONFIG SET failed (possibly related to argument 'maxclients') - duplicate parameter"
    );
    assert_eq!(settings.current(), before);
    settings
        .set(&[(b"maxclients", b"50"), (b"slowlog-max-len", b"9")])
        .unwrap();
    let now = settings.current();
    assert_eq!((now.maxclients, now.slowlog_max_len), (50, 9));
}

/// README.md's configuration table has a row for every setting, whose CONFIG SET column says
/// whether it is mutable ("yes", or the setting's name in a row of several).
#[test]
fn readme_lists_every_setting() {
    let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));
    let start = readme
        .find("## Configuration")
        .expect("README has ## Configuration");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    for s in SETTINGS {
        let row = section
            .lines()
            .find(|l| {
                l.starts_with("| ")
                    && (l.contains(&format!("`--{} ", s.name))
                        || l.contains(&format!("`--{}`", s.name)))
            })
            .unwrap_or_else(|| panic!("README.md's configuration table lacks --{}", s.name));
        let columns: Vec<String> = row
            .replace("\\|", "/")
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        let set = &columns[3];
        let documented = set == "yes" || set.contains(&format!("`{}`", s.name));
        assert_eq!(
            documented,
            s.mutable(),
            "README's CONFIG SET column for {}: {set:?}",
            s.name
        );
    }
}

#[test]
fn rewrite_keeps_comments_and_updates_lines_in_place() {
    let old = "# cairn test config\n\
               \n\
               port = 7001   \n\
               # the memory limit\n\
               max_value_size = \"1mb\"\n\
               client-output-limit = 5\n\
               requirepass = \"\"\"\n\
               old\"\"\"\n\
               port = 7002\n\
               [not-ours]\n";
    let mut current = Config::defaults();
    current.port = 7005;
    current.max_value_size = 2 << 20;
    current.maxclients = 42;
    current.requirepass = Some("new \"one\"".into());
    current.slowlog_max_len = 3;
    let new = rewrite_text(old, &current, &Config::defaults());
    let expected = "# cairn test config\n\
                    \n\
                    port = 7005\n\
                    # the memory limit\n\
                    max_value_size = 2097152\n\
                    requirepass = \"new \\\"one\\\"\"\n\
                    \n\
                    # Generated by CONFIG REWRITE\n\
                    maxclients = 42\n\
                    client-output-buffer-limit = \"normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60\"\n\
                    slowlog-max-len = 3\n\
                    \n\
                    [not-ours]\n";
    // Settings go above the first table header (`[[writeback]]` ...), which is kept as it is.
    assert_eq!(new, expected);
    // Rewriting again changes nothing; the marker is not repeated.
    let clean = new.replace("\n[not-ours]\n", "");
    assert_eq!(rewrite_text(&clean, &current, &Config::defaults()), clean);
    let mut more = current.clone();
    more.latency_monitor_threshold = 9;
    let again = rewrite_text(&clean, &more, &Config::defaults());
    assert_eq!(again.matches("# Generated by CONFIG REWRITE").count(), 1);
    assert!(again.ends_with("slowlog-max-len = 3\nlatency-monitor-threshold = 9\n"));
    // An explicit memcached port is written even at its default (see memcache_tcp_enabled).
    more.memcache_port_explicit = true;
    let again = rewrite_text(&clean, &more, &Config::defaults());
    assert!(again.contains("\nmemcache-port = 11212\n"), "{again}");
}

#[test]
fn rewrite_writes_the_config_file_that_loads_back() {
    let dir = std::env::temp_dir().join(format!("cairn-rewrite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cairn.toml");
    std::fs::write(&path, "# mine\nmaxmemory = \"64mb\"\n").unwrap();
    let config = Config::from_args(["cairn-server", "--config", path.to_str().unwrap()]).unwrap();
    let settings = settings_for(&config);
    settings
        .set(&[(b"maxmemory", b"1mb"), (b"maxmemory-policy", b"noeviction")])
        .unwrap();
    settings.rewrite().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# mine\nmaxmemory = 1048576\n"), "{text}");
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "the temporary file stays behind");
    let reloaded = Config::from_args(["cairn-server", "--config", path.to_str().unwrap()]).unwrap();
    assert_eq!(reloaded, settings.current());
    std::fs::remove_dir_all(&dir).unwrap();
    // Without a file: Redis's error.
    let err = settings_for(&Config::defaults()).rewrite().unwrap_err();
    assert_eq!(err, "The server is running without a config file");
}

#[test]
fn unknown_file_keys_are_refused_with_their_name() {
    let err = super::load::parse_file("port = 1\nmaxmemroy = \"1gb\"\n").unwrap_err();
    assert!(err.contains("unknown key 'maxmemroy'"), "{err}");
    let err = super::load::parse_file("max_value_size = 1\nmax-value-size = 2\n").unwrap_err();
    assert!(err.contains("max-value-size is set twice"), "{err}");
    let err = super::load::parse_file("port = 70000\n").unwrap_err();
    assert!(err.contains("key 'port'"), "{err}");
}

#[test]
fn writeback_tables_load_and_survive_a_rewrite() {
    let text = "port = 7005\n\n[[writeback]]\nname = \"users\"\nprefix = \"user:\"\n\
                database = \"sqlite:///tmp/x.db\"\ntable = \"users\"\nbatch = 10\n";
    let (values, mappings) = super::load::parse_file(text).unwrap();
    assert_eq!(values, vec![("port", "7005".to_string())]);
    assert_eq!(mappings.len(), 1);
    assert_eq!(mappings[0].prefix, "user:");
    assert_eq!(mappings[0].batch, 10);
    let mut current = Config::defaults();
    current.port = 7005;
    current.maxclients = 42;
    let new = super::rewrite::rewrite_text(text, &current, &Config::defaults());
    let (values, again) = super::load::parse_file(&new).unwrap();
    assert!(values.contains(&("maxclients", "42".to_string())), "{new}");
    assert_eq!(again, mappings);
    for bad in [
        "writeback = 1\n",
        "[[writeback]]\nname = \"a\"\nprefix = \"a:\"\ntable = \"t\"\n",
        "[[writeback]]\nprefix = \"a:\"\n",
        "[[writeback]]\nname = \"a\"\nprefix = \"a:\"\ndatabase = \"sqlite://x\"\ntable = \"t\"\nbatch = [1]\n",
    ] {
        assert!(super::load::parse_file(bad).is_err(), "{bad}");
    }
}
