//! The `cairn_*` metric families of `/metrics`: a [`Scrape`] reads every counter once (the
//! same sources INFO reads: `crate::stats`, the store, `crate::memory`, the SQL engine, ...),
//! then encodes it as one `prometheus-client` collector in the OpenMetrics text format.
//! Counters get the `_total` suffix from the encoder; latencies are histograms in seconds.

use std::fmt::Error as FmtError;
use std::sync::atomic::Ordering::Relaxed;

use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::memory::MemoryReport;
use crate::shared::Shared;
use crate::stats::{CommandDetail, LATENCY_BOUNDS_NS, PROTOCOLS};

/// Everything one scrape shows, read before encoding (the collector must own its data).
#[derive(Debug)]
struct Scrape {
    uptime_seconds: f64,
    commands: Vec<(&'static str, CommandDetail)>,
    errors: Vec<(String, u64)>,
    store: store::StoreStats,
    memory: MemoryReport,
    connections: [u64; PROTOCOLS.len()],
    connections_received: u64,
    connections_rejected: u64,
    output_buffer_bytes: u64,
    input_buffer_bytes: u64,
    net_input_bytes: u64,
    net_output_bytes: u64,
    sql: Option<sql::SqlStats>,
    tracking_pushes: u64,
    pubsub_published: u64,
    pubsub_delivered: u64,
    writeback_queue: Vec<(String, u64)>,
    ready: bool,
    loading: bool,
}

impl Scrape {
    fn take(shared: &Shared) -> Scrape {
        let clients = shared.clients.list();
        let mut connections = [0; PROTOCOLS.len()];
        for c in &clients {
            connections[c.protocol as usize] += 1;
        }
        let s = &shared.stats;
        Scrape {
            uptime_seconds: shared.started.elapsed().as_secs_f64(),
            commands: crate::stats::detail_snapshot()
                .into_iter()
                .filter_map(|(slot, d)| Some((crate::command::by_slot(slot)?.name, d)))
                .collect(),
            errors: crate::stats::error_snapshot(),
            store: shared.store.stats(),
            memory: MemoryReport::collect(shared),
            connections,
            connections_received: s.total_connections_received.load(Relaxed),
            connections_rejected: s.rejected_connections.load(Relaxed),
            output_buffer_bytes: clients.iter().map(|c| c.omem.load(Relaxed)).sum(),
            input_buffer_bytes: clients.iter().map(|c| c.qbuf.load(Relaxed)).sum(),
            net_input_bytes: s.net_input_bytes.load(Relaxed),
            net_output_bytes: s.net_output_bytes.load(Relaxed),
            sql: shared.sql.as_ref().map(|e| e.stats()),
            tracking_pushes: crate::tracking::pushes(),
            pubsub_published: shared.pubsub.published.load(Relaxed),
            pubsub_delivered: shared.pubsub.delivered.load(Relaxed),
            writeback_queue: shared
                .writeback
                .mappings()
                .iter()
                .map(|m| (m.config.name.clone(), m.queue_len()))
                .collect(),
            ready: shared.readiness.status().is_ok(),
            loading: shared.persistence.loading(),
        }
    }
}

/// The `/metrics` body.
pub fn render(shared: &Shared) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape::take(shared)));
    let mut out = String::with_capacity(64 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    out
}

/// One value of a family.
#[derive(Debug)]
enum Value {
    Counter(u64),
    Gauge(f64),
    /// sum (seconds), then per-bucket counts with their upper bounds (f64::MAX = +Inf).
    Histogram(f64, Vec<(f64, u64)>),
}

impl Value {
    fn metric_type(&self) -> MetricType {
        match self {
            Value::Counter(_) => MetricType::Counter,
            Value::Gauge(_) => MetricType::Gauge,
            Value::Histogram(..) => MetricType::Histogram,
        }
    }

    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), FmtError> {
        match self {
            Value::Counter(v) => encoder.encode_counter::<NoLabelSet, _, u64>(v, None),
            Value::Gauge(v) => encoder.encode_gauge(v),
            Value::Histogram(sum, buckets) => {
                let count = buckets.iter().map(|(_, n)| n).sum();
                encoder.encode_histogram::<NoLabelSet>(*sum, count, buckets, None)
            }
        }
    }
}

type Labels = Vec<(&'static str, String)>;

/// Writes one family: its descriptor, then each (labels, value). A family with no values
/// (no command run yet, no write-behind mapping) is left out.
fn family(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    values: Vec<(Labels, Value)>,
) -> Result<(), FmtError> {
    let Some((_, first)) = values.first() else {
        return Ok(());
    };
    let mut metric = encoder.encode_descriptor(name, help, None, first.metric_type())?;
    if let [(labels, value)] = values.as_slice() {
        if labels.is_empty() {
            return value.encode(metric);
        }
    }
    for (labels, value) in &values {
        value.encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

/// One unlabelled value.
fn single(value: Value) -> Vec<(Labels, Value)> {
    vec![(Vec::new(), value)]
}

fn seconds_buckets(bounds_ns: &[u64], counts: &[u64]) -> Vec<(f64, u64)> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let bound = bounds_ns.get(i).map_or(f64::MAX, |&ns| ns as f64 / 1e9);
            (bound, n)
        })
        .collect()
}

impl prometheus_client::collector::Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), FmtError> {
        let e = &mut e;
        let by_protocol = |pick: fn(&CommandDetail) -> &[u64; PROTOCOLS.len()]| {
            let mut values = Vec::new();
            for (name, d) in &self.commands {
                for (p, protocol) in PROTOCOLS.iter().enumerate() {
                    if pick(d)[p] > 0 {
                        let labels = vec![
                            ("command", name.to_string()),
                            ("protocol", protocol.to_string()),
                        ];
                        values.push((labels, Value::Counter(pick(d)[p])));
                    }
                }
            }
            values
        };
        family(
            e,
            "cairn_up",
            "1 while the server answers.",
            single(Value::Gauge(1.0)),
        )?;
        family(
            e,
            "cairn_ready",
            "1 when ready for traffic (loaded; on a replica, synced): /readyz.",
            single(Value::Gauge(if self.ready { 1.0 } else { 0.0 })),
        )?;
        family(
            e,
            "cairn_loading",
            "1 while the snapshot loads.",
            single(Value::Gauge(if self.loading { 1.0 } else { 0.0 })),
        )?;
        family(
            e,
            "cairn_uptime_seconds",
            "Seconds since the server started.",
            single(Value::Gauge(self.uptime_seconds)),
        )?;
        let build = vec![(
            vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("commit", crate::config::COMMIT.to_string()),
            ],
            Value::Gauge(1.0),
        )];
        family(
            e,
            "cairn_build_info",
            "The running build (always 1).",
            build,
        )?;
        family(
            e,
            "cairn_commands",
            "Commands run, by command and protocol (INFO commandstats calls).",
            by_protocol(|d| &d.calls),
        )?;
        family(
            e,
            "cairn_command_errors",
            "Commands that replied with an error, by command and protocol (failed_calls).",
            by_protocol(|d| &d.failed),
        )?;
        let rejected = self
            .commands
            .iter()
            .filter(|(_, d)| d.rejected > 0)
            .map(|(name, d)| {
                (
                    vec![("command", name.to_string())],
                    Value::Counter(d.rejected),
                )
            })
            .collect();
        family(
            e,
            "cairn_commands_rejected",
            "Commands refused before running (arity, OOM, NOAUTH, ...), by command.",
            rejected,
        )?;
        let histograms = self
            .commands
            .iter()
            .filter(|(_, d)| d.latency.iter().any(|&n| n > 0))
            .map(|(name, d)| {
                let buckets = seconds_buckets(&LATENCY_BOUNDS_NS, &d.latency);
                let value = Value::Histogram(d.nanos as f64 / 1e9, buckets);
                (vec![("command", name.to_string())], value)
            })
            .collect();
        family(
            e,
            "cairn_command_duration_seconds",
            "Time commands' handlers ran, by command.",
            histograms,
        )?;
        family(
            e,
            "cairn_error_replies",
            "Error replies by error code (INFO errorstats).",
            self.errors
                .iter()
                .map(|(code, n)| (vec![("code", code.clone())], Value::Counter(*n)))
                .collect(),
        )?;
        let st = &self.store;
        for (name, help, v) in [
            (
                "cairn_keyspace_hits",
                "Reads that found their key.",
                st.hits,
            ),
            (
                "cairn_keyspace_misses",
                "Reads that did not find their key.",
                st.misses,
            ),
            (
                "cairn_expired_keys",
                "Keys removed because their TTL passed.",
                st.expired,
            ),
            (
                "cairn_evicted_keys",
                "Keys evicted to stay under maxmemory.",
                st.evicted,
            ),
            (
                "cairn_connections_received",
                "Connections accepted.",
                self.connections_received,
            ),
            (
                "cairn_connections_rejected",
                "Connections refused (maxclients).",
                self.connections_rejected,
            ),
            (
                "cairn_net_input_bytes",
                "Bytes read from clients.",
                self.net_input_bytes,
            ),
            (
                "cairn_net_output_bytes",
                "Bytes written to clients.",
                self.net_output_bytes,
            ),
            (
                "cairn_tracking_pushes",
                "Client-tracking invalidation messages sent.",
                self.tracking_pushes,
            ),
            (
                "cairn_pubsub_messages_published",
                "Messages published (PUBLISH).",
                self.pubsub_published,
            ),
            (
                "cairn_pubsub_messages_delivered",
                "Copies of published messages delivered to subscribers.",
                self.pubsub_delivered,
            ),
        ] {
            family(e, name, help, single(Value::Counter(v)))?;
        }
        for (name, help, v) in [
            ("cairn_keys", "Keys in the keyspace.", st.keys),
            (
                "cairn_expiring_keys",
                "Keys with a TTL.",
                st.keys_with_expiry,
            ),
            (
                "cairn_client_output_buffer_bytes",
                "Replies queued for clients, not yet sent.",
                self.output_buffer_bytes,
            ),
            (
                "cairn_client_input_buffer_bytes",
                "Clients' unprocessed input.",
                self.input_buffer_bytes,
            ),
            (
                "cairn_memory_used_bytes",
                "INFO used_memory.",
                self.memory.used,
            ),
            (
                "cairn_memory_rss_bytes",
                "Resident set size.",
                self.memory.rss,
            ),
            (
                "cairn_memory_peak_bytes",
                "Peak of used_memory.",
                self.memory.peak,
            ),
            (
                "cairn_memory_max_bytes",
                "maxmemory (0 = none).",
                self.memory.maxmemory,
            ),
        ] {
            family(e, name, help, single(Value::Gauge(v as f64)))?;
        }
        let connections = PROTOCOLS
            .iter()
            .zip(self.connections)
            .map(|(p, n)| (vec![("protocol", p.to_string())], Value::Gauge(n as f64)))
            .collect();
        family(
            e,
            "cairn_connections",
            "Connected clients, by protocol.",
            connections,
        )?;
        let kinds = self
            .memory
            .kinds()
            .iter()
            .map(|(kind, bytes)| {
                (
                    vec![("kind", kind.to_string())],
                    Value::Gauge(*bytes as f64),
                )
            })
            .collect();
        family(
            e,
            "cairn_memory_bytes",
            "Memory by kind (MEMORY STATS cairn.*; tracking_table is an estimate).",
            kinds,
        )?;
        if let Some(sql) = &self.sql {
            family(
                e,
                "cairn_sql_queue_depth",
                "SQL statements waiting for an engine thread.",
                single(Value::Gauge(sql.queued as f64)),
            )?;
            family(
                e,
                "cairn_sql_statements",
                "SQL statements run.",
                single(Value::Counter(sql.statements)),
            )?;
            family(
                e,
                "cairn_sql_inline_statements",
                "SQL queries run on an I/O thread within the inline step budget (of the statements run).",
                single(Value::Counter(sql.inline)),
            )?;
            family(
                e,
                "cairn_sql_inline_handed_off",
                "SQL queries tried on an I/O thread and handed to the engine threads (long, met a writer, rows to expire).",
                single(Value::Counter(sql.handed_off)),
            )?;
            let buckets = seconds_buckets(&sql::LATENCY_BOUNDS_NS, &sql.latency);
            family(
                e,
                "cairn_sql_statement_duration_seconds",
                "Time SQL statements ran on the engine (not their wait in the queue).",
                single(Value::Histogram(sql.latency_nanos as f64 / 1e9, buckets)),
            )?;
        }
        family(
            e,
            "cairn_writeback_queue_depth",
            "Write-behind records not yet applied to their database, by mapping.",
            self.writeback_queue
                .iter()
                .map(|(m, n)| (vec![("mapping", m.clone())], Value::Gauge(*n as f64)))
                .collect(),
        )?;
        Ok(())
    }
}
