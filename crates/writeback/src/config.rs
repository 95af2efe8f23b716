//! One mapping's configuration: which keys (a prefix) or which of cairn's SQL tables, which
//! database and table, how values become columns, and the flusher's pacing. Parsed from `key value` pairs, the one form both
//! the TOML file's `[[writeback]]` tables and `WB.ADD name key value ...` give.

use std::time::Duration;

/// How a cached value becomes the row's columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueShape {
    /// A hash's fields are columns of the same name.
    Hash,
    /// A string value is this one column.
    String { column: String },
}

/// When the client's reply comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// After the write is in the durable log; the database follows.
    Behind,
    /// After the database committed the row; an error reply (and the cache put back) when
    /// the database refuses it.
    Through,
}

/// Where the rows go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Database {
    /// `sqlite:///path/to/file.db` (three slashes and an absolute path, or a relative one).
    Sqlite(String),
    /// `postgresql://user@host:port/db` (or `postgres://`), as libpq's URLs.
    Postgres(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappingConfig {
    pub name: String,
    /// The keys mapped; empty for an `sql_table` mapping (which maps no keys).
    pub prefix: String,
    /// The cairn SQL table whose rows are written back (instead of keys): its rows go to the
    /// same-schema `table`, keyed by its one-column primary key.
    pub sql_table: Option<String>,
    pub database: Database,
    pub table: String,
    pub key_column: String,
    pub value: ValueShape,
    pub mode: Mode,
    /// A key's changes within this window become one row write.
    pub delay: Duration,
    /// Rows per database transaction at most.
    pub batch: usize,
    /// Attempts of a row the database refuses before it goes to the dead-letter list.
    pub retries: u32,
    /// A read of a missing mapped key loads its row (`crate::read`).
    pub read_through: bool,
    /// How long a row found missing is remembered as missing (zero: not remembered).
    pub negative_ttl: Duration,
    /// The TTL of records loaded by read-through (None: they do not expire).
    pub ttl: Option<Duration>,
    /// Write-through: how long a reply waits for the database (down or slow) before it is an
    /// error saying the write stays queued.
    pub through_timeout: Duration,
}

/// Names cairn puts in SQL text as quoted identifiers: letters, digits and `_` only, so that
/// no quoting question arises.
fn identifier(what: &str, v: &str) -> Result<String, String> {
    let ok = !v.is_empty()
        && v.len() <= 63
        && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !v.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!(
            "{what} '{v}' must be letters, digits and _ (at most 63)"
        ))
    }
}

/// `100ms`, `30s`, `5m`, `1h`, or a bare number of milliseconds.
pub fn parse_duration(v: &str) -> Result<Duration, String> {
    let v = v.trim();
    let (num, unit) = match v.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => v.split_at(i),
        None => (v, "ms"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{v}' is not a duration (like 100ms, 30s, 5m, 1h)"))?;
    let ms = match unit {
        "ms" => n,
        "s" => n.saturating_mul(1000),
        "m" => n.saturating_mul(60_000),
        "h" => n.saturating_mul(3_600_000),
        _ => return Err(format!("'{v}' is not a duration (like 100ms, 30s, 5m, 1h)")),
    };
    Ok(Duration::from_millis(ms))
}

impl MappingConfig {
    /// Parses a mapping from its `key value` pairs (keys with `_` or `-`).
    pub fn from_pairs(name: &str, pairs: &[(String, String)]) -> Result<MappingConfig, String> {
        let name = identifier("name", name)?;
        let mut prefix = None;
        let mut sql_table = None;
        let mut database = None;
        let mut table = None;
        let mut key_column = "id".to_string();
        let mut value = None;
        let mut value_column = None;
        let mut mode = Mode::Behind;
        let mut delay = Duration::from_millis(100);
        let mut batch = 500;
        let mut retries = 5;
        let mut read_through = false;
        let mut negative_ttl = Duration::ZERO;
        let mut ttl = None;
        let mut through_timeout = Duration::from_secs(5);
        for (k, v) in pairs {
            match k.replace('-', "_").to_ascii_lowercase().as_str() {
                "name" => {
                    if v != &name {
                        return Err(format!("name '{v}' differs from the mapping's '{name}'"));
                    }
                }
                "prefix" if v.is_empty() => return Err("prefix must not be empty".into()),
                "prefix" => prefix = Some(v.clone()),
                "database" => {
                    database = Some(if let Some(path) = v.strip_prefix("sqlite://") {
                        Database::Sqlite(path.to_string())
                    } else if v.starts_with("postgresql://") || v.starts_with("postgres://") {
                        Database::Postgres(v.clone())
                    } else {
                        return Err(format!(
                            "database '{v}': expected sqlite:///path or postgresql://..."
                        ));
                    })
                }
                "table" => table = Some(identifier("table", v)?),
                "key_column" => key_column = identifier("key_column", v)?,
                "value" => value = Some(v.to_ascii_lowercase()),
                "value_column" => value_column = Some(identifier("value_column", v)?),
                "mode" => {
                    mode = match v.to_ascii_lowercase().as_str() {
                        "behind" => Mode::Behind,
                        "through" => Mode::Through,
                        _ => return Err(format!("mode '{v}': expected behind or through")),
                    }
                }
                "delay" => delay = parse_duration(v)?,
                "through_timeout" => {
                    through_timeout = Some(parse_duration(v)?)
                        .filter(|d| !d.is_zero() && *d <= Duration::from_secs(3600))
                        .ok_or_else(|| format!("through_timeout '{v}': expected 1ms to 1h"))?
                }
                "batch" => {
                    batch = v
                        .parse()
                        .ok()
                        .filter(|b| (1..=100_000).contains(b))
                        .ok_or_else(|| format!("batch '{v}': expected 1 to 100000"))?
                }
                "retries" => {
                    retries = v
                        .parse()
                        .ok()
                        .filter(|r| (1..=1000).contains(r))
                        .ok_or_else(|| format!("retries '{v}': expected 1 to 1000"))?
                }
                "read_through" => {
                    read_through = match v.to_ascii_lowercase().as_str() {
                        "true" | "yes" | "1" | "on" => true,
                        "false" | "no" | "0" | "off" => false,
                        _ => return Err(format!("read_through '{v}': expected true or false")),
                    }
                }
                "negative_ttl" => negative_ttl = parse_duration(v)?,
                "ttl" => {
                    let d = parse_duration(v)?;
                    ttl = (!d.is_zero()).then_some(d);
                }
                "sql_table" => sql_table = Some(identifier("sql_table", v)?.to_ascii_lowercase()),
                _ => return Err(format!("unknown mapping key '{k}'")),
            }
        }
        if sql_table.is_some() {
            // A row's columns are the table's own: none of the key mapping's shape applies.
            if prefix.is_some() {
                return Err("a mapping takes a prefix or an sql_table, not both".into());
            }
            if value.is_some() || value_column.is_some() {
                return Err("an sql_table mapping takes no value nor value_column".into());
            }
            if pairs
                .iter()
                .any(|(k, _)| k.replace('-', "_").eq_ignore_ascii_case("key_column"))
            {
                return Err("an sql_table mapping takes no key_column (the primary key is)".into());
            }
            // A row written by SQL.EXEC has no previous record to restore nor a key to load.
            if mode == Mode::Through || read_through {
                return Err(
                    "an sql_table mapping is write-behind only (no through, no read_through)"
                        .into(),
                );
            }
            prefix = Some(String::new());
        }
        let value = match (value.as_deref(), value_column) {
            (Some("hash") | None, None) => ValueShape::Hash,
            (Some("string") | None, Some(column)) => ValueShape::String { column },
            (Some("string"), None) => return Err("value 'string' needs value_column".into()),
            (Some("hash"), Some(_)) => return Err("value 'hash' takes no value_column".into()),
            (Some(v), _) => return Err(format!("value '{v}': expected hash or string")),
        };
        Ok(MappingConfig {
            prefix: prefix.ok_or("a mapping needs a prefix (or an sql_table)")?,
            sql_table,
            database: database.ok_or("a mapping needs a database")?,
            table: table.ok_or("a mapping needs a table")?,
            name,
            key_column,
            value,
            mode,
            delay,
            batch,
            retries,
            read_through,
            negative_ttl,
            ttl,
            through_timeout,
        })
    }

    /// The pairs `from_pairs` reads back (WB.INFO, CONFIG REWRITE).
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("name", self.name.clone()),
            match &self.sql_table {
                Some(t) => ("sql_table", t.clone()),
                None => ("prefix", self.prefix.clone()),
            },
            (
                "database",
                match &self.database {
                    Database::Sqlite(p) => format!("sqlite://{p}"),
                    Database::Postgres(url) => url.clone(),
                },
            ),
            ("table", self.table.clone()),
        ];
        if self.sql_table.is_none() {
            out.push(("key_column", self.key_column.clone()));
            match &self.value {
                ValueShape::Hash => out.push(("value", "hash".into())),
                ValueShape::String { column } => {
                    out.push(("value", "string".into()));
                    out.push(("value_column", column.clone()));
                }
            }
        }
        let mode = match self.mode {
            Mode::Behind => "behind",
            Mode::Through => "through",
        };
        out.push(("mode", mode.into()));
        out.push(("delay", format!("{}ms", self.delay.as_millis())));
        out.push(("batch", self.batch.to_string()));
        out.push(("retries", self.retries.to_string()));
        out.push(("read_through", self.read_through.to_string()));
        out.push((
            "negative_ttl",
            format!("{}ms", self.negative_ttl.as_millis()),
        ));
        let ttl = self.ttl.map_or(0, |d| d.as_millis());
        out.push(("ttl", format!("{ttl}ms")));
        out.push((
            "through_timeout",
            format!("{}ms", self.through_timeout.as_millis()),
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_and_renders_back() {
        let c = MappingConfig::from_pairs(
            "users",
            &pairs(&[
                ("prefix", "user:"),
                ("database", "sqlite:///tmp/x.db"),
                ("table", "users"),
                ("value", "string"),
                ("value_column", "body"),
                ("delay", "2s"),
                ("read_through", "true"),
                ("negative_ttl", "30s"),
                ("ttl", "1h"),
                ("mode", "through"),
                ("through-timeout", "250ms"),
            ]),
        )
        .unwrap();
        assert_eq!(c.mode, Mode::Through);
        assert_eq!(c.through_timeout, Duration::from_millis(250));
        assert_eq!(c.database, Database::Sqlite("/tmp/x.db".into()));
        assert_eq!(c.delay, Duration::from_secs(2));
        assert!(c.read_through);
        assert_eq!(c.negative_ttl, Duration::from_secs(30));
        assert_eq!(c.ttl, Some(Duration::from_secs(3600)));
        let back: Vec<(String, String)> = c
            .to_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(MappingConfig::from_pairs("users", &back).unwrap(), c);
    }

    #[test]
    fn refuses_bad_input() {
        let base = [("prefix", "u:"), ("database", "sqlite://x"), ("table", "t")];
        assert!(MappingConfig::from_pairs("a b", &pairs(&base)).is_err());
        let mut p = pairs(&base);
        p.push(("table".into(), "t; drop".into()));
        assert!(MappingConfig::from_pairs("a", &p).is_err());
        let mut p = pairs(&base);
        p.push(("delay".into(), "soon".into()));
        assert!(MappingConfig::from_pairs("a", &p).is_err());
        assert!(MappingConfig::from_pairs("a", &pairs(&base[..2])).is_err());
        let mut p = pairs(&base);
        p.push(("mode".into(), "sideways".into()));
        assert!(MappingConfig::from_pairs("a", &p).is_err());
        let mut p = pairs(&base);
        p.push(("through_timeout".into(), "0".into()));
        assert!(MappingConfig::from_pairs("a", &p).is_err());
        let mut p = pairs(&base);
        p.push(("database".into(), "mysql://x".into()));
        assert!(MappingConfig::from_pairs("a", &p).is_err());
        let mut p = pairs(&base);
        p.push(("read_through".into(), "maybe".into()));
        assert!(MappingConfig::from_pairs("a", &p).is_err());
        let mut p = pairs(&base);
        p.push(("sql_table".into(), "stats".into()));
        assert!(
            MappingConfig::from_pairs("a", &p).is_err(),
            "prefix and sql_table"
        );
    }

    #[test]
    fn sql_table_mapping_round_trips() {
        let c = MappingConfig::from_pairs(
            "stats",
            &pairs(&[
                ("sql_table", "Stats"),
                ("database", "sqlite:///tmp/x.db"),
                ("table", "stats"),
            ]),
        )
        .unwrap();
        assert_eq!(c.sql_table.as_deref(), Some("stats"));
        assert_eq!(c.prefix, "");
        let back: Vec<(String, String)> = c
            .to_pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(MappingConfig::from_pairs("stats", &back).unwrap(), c);
        let mut p = back.clone();
        p.push(("value".into(), "hash".into()));
        assert!(MappingConfig::from_pairs("stats", &p).is_err());
    }
}
