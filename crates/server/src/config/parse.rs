//! Parsers and renderers of setting values: sizes, durations, integers in a range, octal
//! permissions, and the enumerations (I/O model, maxmemory policy, log level).
//!
//! Error texts follow Redis's CONFIG SET where Redis has the same kind of value ("argument
//! couldn't be parsed into an integer", "argument must be between 1 and 4294967295 inclusive").

use std::time::Duration;

use super::{IoModel, MaxmemoryPolicy};

/// Parses a size: a number with an optional case-insensitive suffix b, k/kb, m/mb, g/gb, t/tb
/// (all powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "invalid size '{s}' (expected e.g. 1024, 100k, 64mb, 2gb)"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size '{s}' is too large"))?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        "t" | "tb" => 1 << 40,
        _ => {
            return Err(format!(
                "invalid size suffix in '{s}' (use k, kb, m, mb, g or gb)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// A size that must fit in memory (`usize`).
pub fn parse_size_usize(s: &str) -> Result<usize, String> {
    let n = parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("size '{s}' is too large"))
}

/// Parses a duration: `1s`, `500ms`, `2m`, or a bare number of milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim().to_ascii_lowercase();
    let (digits, unit_ms) = if let Some(d) = t.strip_suffix("ms") {
        (d, 1)
    } else if let Some(d) = t.strip_suffix('s') {
        (d, 1000)
    } else if let Some(d) = t.strip_suffix('m') {
        (d, 60_000)
    } else {
        (t.as_str(), 1)
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration '{s}' (e.g. 1s, 500ms)"))?;
    n.checked_mul(unit_ms)
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("invalid duration '{s}' (must be positive)"))
}

/// Renders a duration so that [`parse_duration`] reads it back: whole seconds as `Ns`,
/// otherwise `Nms`.
pub fn render_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// An integer in `min..=max`, with Redis's error texts.
pub fn parse_int_in(s: &str, min: i64, max: i64) -> Result<i64, String> {
    let n: i64 = s
        .trim()
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "argument must be between {min} and {max} inclusive"
        ))
    }
}

/// `maxclients`: 1 to 4294967295, as Redis (0 would refuse every connection).
pub fn parse_maxclients(s: &str) -> Result<usize, String> {
    let n = parse_int_in(s, 1, i64::from(u32::MAX))?;
    usize::try_from(n).map_err(|_| "argument is too large".to_string())
}

/// `max-value-size`: a size of at least one byte (0 would refuse every value and request).
pub fn parse_max_value_size(s: &str) -> Result<usize, String> {
    match parse_size_usize(s)? {
        0 => Err(format!(
            "argument must be between 1 and {} inclusive",
            i64::MAX
        )),
        n => Ok(n),
    }
}

/// Smallest `client-query-buffer-limit` (Redis's minimum too).
pub const MIN_QUERY_BUFFER_LIMIT: usize = 1 << 20;

/// `client-query-buffer-limit`: at least 1mb.
pub fn parse_query_buffer_limit(s: &str) -> Result<usize, String> {
    match parse_size_usize(s)? {
        n if n < MIN_QUERY_BUFFER_LIMIT => Err(format!(
            "argument must be between {MIN_QUERY_BUFFER_LIMIT} and {} inclusive",
            i64::MAX
        )),
        n => Ok(n),
    }
}

/// The input buffer a connection may grow to: the query buffer limit, but never less than one
/// argument of `max_value_size` plus room for its request's other arguments.
pub fn effective_query_buffer_limit(query_buffer_limit: usize, max_value_size: usize) -> usize {
    query_buffer_limit.max(max_value_size.saturating_add(1 << 20))
}

/// A count of at least one.
pub fn parse_positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("invalid number '{s}'")),
    }
}

/// A TCP port; 0 means "no listener".
pub fn parse_port(s: &str) -> Result<u16, String> {
    parse_int_in(s, 0, i64::from(u16::MAX)).map(|n| n as u16)
}

/// Unix socket permissions in octal (`700`, `0770`, `0o770`); `0` or empty = leave the
/// permissions the process's umask gives (Redis's `unixsocketperm 0`).
pub fn parse_octal_perm(s: &str) -> Result<Option<u32>, String> {
    let t = s.trim();
    let t = t.strip_prefix("0o").unwrap_or(t);
    if t.is_empty() {
        return Ok(None);
    }
    match u32::from_str_radix(t, 8) {
        Ok(0) => Ok(None),
        Ok(n) if n <= 0o7777 => Ok(Some(n)),
        _ => Err(format!(
            "invalid permissions '{s}' (expected octal, e.g. 700 or 0770)"
        )),
    }
}

/// An empty text means "not set" (paths, password).
pub fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

pub fn parse_io_model(s: &str) -> Result<IoModel, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "reactor" => Ok(IoModel::Reactor),
        "dispatch" => Ok(IoModel::Dispatch),
        _ => Err(format!(
            "invalid I/O model '{s}' (expected reactor or dispatch)"
        )),
    }
}

/// A `maxmemory-policy`: Redis's names, plus cairn's older `evict` (allkeys-lru, the CLOCK
/// it always was) and `no-eviction`.
pub fn parse_policy(s: &str) -> Result<MaxmemoryPolicy, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "evict" => Ok(MaxmemoryPolicy::AllKeysLru),
        "no-eviction" => Ok(MaxmemoryPolicy::NoEviction),
        name => MaxmemoryPolicy::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = MaxmemoryPolicy::ALL.iter().map(|p| p.name()).collect();
            format!("invalid policy '{s}' (expected {})", names.join(", "))
        }),
    }
}

/// Normalises a log level to one of trace, debug, verbose, info, notice, warning, error,
/// nothing.
pub fn parse_loglevel(s: &str) -> Result<String, String> {
    let l = s.trim().to_ascii_lowercase();
    let norm = match l.as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "verbose" => "verbose",
        "info" => "info",
        "notice" => "notice",
        "warning" | "warn" => "warning",
        "error" => "error",
        "nothing" | "off" | "none" => "nothing",
        _ => {
            return Err(format!(
                "invalid log level '{s}' (expected debug, verbose, info, notice, warning, error or nothing)"
            ))
        }
    };
    Ok(norm.to_string())
}

/// A setting kept for Redis clients that takes one value only (`databases 1`, `save ""`,
/// `appendonly no`): other values are refused with `why`.
pub fn only(s: &str, accepted: &[&str], why: &str) -> Result<(), String> {
    if accepted.iter().any(|a| a.eq_ignore_ascii_case(s.trim())) {
        Ok(())
    } else {
        Err(why.to_string())
    }
}

/// Parses `save` rules: "SECONDS CHANGES [SECONDS CHANGES ...]" ("" = none), Redis's meaning:
/// save when at least CHANGES changes happened and SECONDS passed since the last save.
pub fn parse_rules(text: &str) -> Result<Vec<(u64, u64)>, String> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    if !parts.len().is_multiple_of(2) {
        return Err("Invalid save parameters".into());
    }
    parts
        .chunks(2)
        .map(|pair| {
            let secs = pair[0].parse::<u64>();
            let changes = pair[1].parse::<u64>();
            match (secs, changes) {
                (Ok(s), Ok(c)) => Ok((s, c)),
                _ => Err("Invalid save parameters".into()),
            }
        })
        .collect()
}

pub fn render_rules(rules: &[(u64, u64)]) -> String {
    rules
        .iter()
        .map(|(s, c)| format!("{s} {c}"))
        .collect::<Vec<_>>()
        .join(" ")
}
