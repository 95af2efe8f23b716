//! The `cairn-server` binary: parses configuration and runs the server until a signal stops it.

use std::process::exit;

use std::sync::Arc;

use cairn_server::config::{Config, ConfigError, LogFormat};
use cairn_server::daemon::{LogFile, LogSink};
use cairn_server::net::Server;
use cairn_server::shared::Shared;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tracing::{error, info, warn};

#[global_allocator]
static GLOBAL: cairn_server::allocator::Allocator = cairn_server::allocator::Allocator;

fn main() {
    disable_transparent_huge_pages();
    tune_allocator();
    let config = match Config::load() {
        Ok(c) => c,
        Err(ConfigError::Args(e)) => e.exit(),
        Err(e) => {
            eprintln!("cairn-server: {e}");
            exit(1);
        }
    };
    let logfile = init_logging(&config);
    cairn_server::clients::now_ms();
    raise_fd_limit(config.maxclients);
    cairn_server::command::init_clock();

    // Registered before any thread starts, so every thread inherits the handlers.
    // SIGHUP is caught too: its default action would kill the server (a closed terminal,
    // or an operator's `kill -HUP` meant to reopen logs).
    let mut signals = match Signals::new([SIGTERM, SIGINT, SIGHUP]) {
        Ok(s) => s,
        Err(e) => {
            error!("cannot install signal handlers: {e}");
            exit(1);
        }
    };

    info!(
        version = env!("CARGO_PKG_VERSION"),
        commit = cairn_server::config::COMMIT,
        pid = std::process::id(),
        maxmemory = config.maxmemory,
        policy = config.maxmemory_policy.name(),
        "cairn starting"
    );
    let shared = Shared::new(config);
    let snapshot = snapshot_to_load(&shared);
    if snapshot.is_some() {
        // Set before the listeners open: the first clients already get -LOADING.
        shared.persistence.set_loading();
    }
    let server = match Server::start(shared.clone()) {
        Ok(s) => s,
        Err(e) => {
            error!("{e}");
            exit(1);
        }
    };
    if shared.config.metrics_port != 0 {
        let (bind, port) = (&shared.config.metrics_bind, shared.config.metrics_port);
        match cairn_server::exporter::start(&shared, bind, port) {
            Ok(addr) => info!("metrics endpoint on http://{addr}/metrics (/healthz, /readyz)"),
            Err(e) => {
                error!("metrics endpoint {bind}:{port}: {e}");
                exit(1);
            }
        }
    }
    match snapshot {
        Some(path) => {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("cairn-load".into())
                .spawn(move || {
                    load_snapshot(&shared, &path);
                    notify_ready();
                    // A replica links up once its data is loaded (its snapshot's replication
                    // mark lets it continue where it was).
                    cairn_server::replica_link::start(&shared);
                })
                .expect("spawn the loading thread");
        }
        None => {
            notify_ready();
            cairn_server::replica_link::start(&shared);
        }
    }

    let signal = signals.forever().find(|&sig| {
        if sig == SIGHUP {
            reopen_logfile(logfile.as_deref());
        }
        sig != SIGHUP
    });
    info!(signal = signal.map(signal_name), "shutting down");
    if let Err(e) = cairn_server::daemon::sd_notify("STOPPING=1") {
        warn!("could not tell the service manager that cairn is stopping: {e}");
    }
    // A second signal while shutting down exits at once.
    std::thread::spawn(move || {
        if signals.forever().any(|sig| sig != SIGHUP) {
            warn!("second signal: exiting now");
            exit(1);
        }
    });
    server.shutdown();
    if let Err(e) = cairn_server::command::shutdown_save(&shared, None) {
        error!("error trying to save the snapshot before shutting down: {e}");
    }
    info!("bye");
    // Skip freeing the keyspace: the OS reclaims it faster.
    exit(0);
}

/// The snapshot to load at start, if `dir/dbfilename` exists. A `dir` that is not a
/// directory stops the server, as in Redis.
fn snapshot_to_load(shared: &Shared) -> Option<std::path::PathBuf> {
    let (target, _) = shared.snapshot_target();
    if !target.dir.is_dir() {
        error!(
            "can't use dir '{}': not a directory (create it, or give another --dir)",
            target.dir.display()
        );
        exit(1);
    }
    let path = target.path();
    path.exists().then_some(path)
}

/// Loads the snapshot on all cores; a file that cannot be loaded stops the server with the
/// reason (which names the damaged block).
fn load_snapshot(shared: &Shared, path: &std::path::Path) {
    let settings = shared.settings.persist.read().clone();
    let damaged = if settings.load_damaged_skip {
        cairn_server::snapshot::Damaged::Skip
    } else {
        cairn_server::snapshot::Damaged::Refuse
    };
    let threads = cairn_server::command::persist_cmd::load_threads();
    info!(path = %path.display(), threads, "loading the snapshot");
    match shared
        .persistence
        .load(path, damaged, threads, settings.key_load_delay)
    {
        Ok(r) => info!(
            "snapshot loaded: {} keys ({} expired skipped, {} damaged parts skipped) from {} \
             bytes in {:.3}s ({:.2} M keys/s)",
            r.records,
            r.expired,
            r.skipped.len(),
            r.file_bytes,
            r.took.as_secs_f64(),
            r.records as f64 / r.took.as_secs_f64().max(1e-9) / 1e6
        ),
        Err(e) => {
            error!("{e}");
            exit(1);
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "SIGTERM",
        SIGINT => "SIGINT",
        SIGHUP => "SIGHUP",
        _ => "?",
    }
}

/// Logs to stderr, or to `--logfile` (returned, for SIGHUP to reopen), as text or JSON lines.
fn init_logging(config: &Config) -> Option<Arc<LogFile>> {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let logfile = config
        .logfile
        .as_ref()
        .map(|path| match LogFile::open(path) {
            Ok(file) => file,
            Err(e) => {
                eprintln!(
                    "cairn-server: can't open the log file {}: {e}",
                    path.display()
                );
                exit(1);
            }
        });
    let writer = match &logfile {
        Some(file) => BoxMakeWriter::new(LogSink(file.clone())),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_max_level(config.level_filter())
        .with_target(false);
    match config.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
    logfile
}

/// SIGHUP: reopens `--logfile` (after logrotate moved it); without one, logs go to stderr,
/// which the supervisor owns, and there is nothing to reopen.
fn reopen_logfile(logfile: Option<&LogFile>) {
    match logfile {
        Some(file) => match file.reopen() {
            Ok(()) => info!(
                "received SIGHUP: reopened the log file {}",
                file.path().display()
            ),
            Err(e) => error!(
                "received SIGHUP: can't reopen the log file {}: {e} (still writing to the old one)",
                file.path().display()
            ),
        },
        None => info!("received SIGHUP: ignored (logs go to stderr; nothing to reopen)"),
    }
}

/// Tells systemd (`Type=notify`) that the server is ready: listening, snapshot loaded.
fn notify_ready() {
    match cairn_server::daemon::sd_notify("READY=1") {
        Ok(true) => info!("told the service manager that cairn is ready"),
        Ok(false) => {}
        Err(e) => warn!("could not tell the service manager that cairn is ready: {e}"),
    }
}

/// Opts this process out of transparent huge pages, as Redis does by default: with THP, memory
/// the allocator touched once stays resident in 2 MiB pieces (and copy-on-write and compaction
/// cause latency spikes), which a cache that counts bytes per key cannot afford.
fn disable_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and changes only this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        warn!(
            "could not disable transparent huge pages: {}",
            std::io::Error::last_os_error()
        );
    }
}

extern "C" {
    /// mimalloc's option setter (in the library the allocator crate links; its Rust binding is
    /// behind a feature that needs another crate).
    fn mi_option_set(option: libc::c_int, value: libc::c_long);
}

/// `mi_option_purge_delay`, `mi_option_generic_collect` and `mi_option_page_reclaim_on_free`
/// in mimalloc 3.3 (`mimalloc.h`, enum `mi_option_e`).
const MI_OPTION_PURGE_DELAY: libc::c_int = 15;
const MI_OPTION_GENERIC_COLLECT: libc::c_int = 34;
const MI_OPTION_PAGE_RECLAIM_ON_FREE: libc::c_int = 35;

/// Two mimalloc options that cost RSS when I/O threads share the records (docs/memory.md): with
/// two threads writing 1M small keys, RSS was 16-25 bytes per key above what the records and
/// index take, against 1.5 with one thread. Taking an abandoned (full) page back into the heap
/// of a thread that frees one of its blocks left pages part empty (off: ~9 B/key less; the page
/// is still reused, by the next allocation that needs one), and collecting a thread's heap
/// every 1,000 slow-path allocations instead of 10,000 gives its emptied pages back sooner
/// (~6 B/key less; the same instructions per request within 1%, callgrind). Since small records
/// live in the store's slab pages, what mimalloc frees in bulk is mostly outgrown index arrays,
/// which records no longer reuse: giving them back after 10 ms instead of mimalloc 3's 1 s
/// takes RSS from 67-81 to 67 B/key with 1M small keys (docs/memory.md).
fn tune_allocator() {
    // SAFETY: sets integer options before any thread but this one exists.
    unsafe {
        mi_option_set(MI_OPTION_PAGE_RECLAIM_ON_FREE, -1);
        mi_option_set(MI_OPTION_GENERIC_COLLECT, 1000);
        mi_option_set(MI_OPTION_PURGE_DELAY, 10);
    }
}

/// Raises the open-file soft limit to the hard limit, so that `maxclients` connections fit.
fn raise_fd_limit(maxclients: usize) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    // Listeners, pollers, wakers and the store's files need a few dozen descriptors.
    let needed = maxclients as u64 + 64;
    if lim.rlim_cur < needed {
        warn!(
            "open file limit is {} but maxclients {maxclients} needs about {needed}: connections past the limit \
             will fail to be accepted",
            lim.rlim_cur
        );
    }
}
