//! Unsent-output limits per client class (Redis's `client-output-buffer-limit`): their type,
//! parser and rendering.

use super::parse::parse_size;

/// Unsent-output limits of one client class: past `hard` bytes the client is disconnected at
/// once, past `soft` bytes when it stays there for `soft_secs` seconds; 0 = no such limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

impl ClassLimit {
    pub fn is_unlimited(&self) -> bool {
        self.hard == 0 && self.soft == 0
    }
}

/// Redis's `client-output-buffer-limit` classes. Normal clients have no limit by default (their
/// output only grows while they send requests, and the runtime stops reading those while the
/// socket is full); pub/sub and tracking messages pile up without the client asking, so that
/// class is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: ClassLimit,
    /// Declared for CONFIG compatibility; cairn has no replicas yet.
    pub replica: ClassLimit,
    pub pubsub: ClassLimit,
}

impl Default for OutputLimits {
    fn default() -> OutputLimits {
        OutputLimits {
            normal: ClassLimit::default(),
            replica: ClassLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_secs: 60,
            },
            pubsub: ClassLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_secs: 60,
            },
        }
    }
}

impl OutputLimits {
    /// The defaults with the given `<class> <hard> <soft> <soft-seconds>` groups applied.
    pub fn parse(text: &str) -> Result<OutputLimits, String> {
        let mut limits = OutputLimits::default();
        limits.update(text)?;
        Ok(limits)
    }

    /// Applies `<class> <hard> <soft> <soft-seconds>` groups (CONFIG SET); all or nothing.
    pub fn update(&mut self, text: &str) -> Result<(), String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err("Wrong number of arguments in buffer limit configuration.".into());
        }
        let mut next = *self;
        for group in words.chunks(4) {
            let class = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut next.normal,
                "replica" | "slave" => &mut next.replica,
                "pubsub" => &mut next.pubsub,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    )
                }
            };
            let hard = parse_size(group[1]);
            let soft = parse_size(group[2]);
            let secs = group[3].parse::<u64>();
            let (Ok(hard), Ok(soft), Ok(soft_secs)) = (hard, soft, secs) else {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                );
            };
            *class = ClassLimit {
                hard,
                soft,
                soft_secs,
            };
        }
        *self = next;
        Ok(())
    }

    /// As CONFIG GET shows it (Redis's form and class order).
    pub fn render(&self) -> String {
        [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ]
        .iter()
        .map(|(name, c)| format!("{name} {} {} {}", c.hard, c.soft, c.soft_secs))
        .collect::<Vec<_>>()
        .join(" ")
    }
}

/// The sizes up to which Redis keeps a small collection packed (`hash-max-listpack-entries`
/// and the rest): cairn's representation does not change with them, but OBJECT ENCODING names
/// the encoding Redis would use by them, and CONFIG GET / SET answer as Redis's do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingLimits {
    pub hash_entries: i64,
    pub hash_value: i64,
    pub set_intset_entries: i64,
    pub set_entries: i64,
    pub set_value: i64,
    pub zset_entries: i64,
    pub zset_value: i64,
    /// Redis's `list-max-listpack-size`: positive, entries per node; negative, -1..-5 for
    /// 4 KiB..64 KiB per node.
    pub list_size: i64,
}

impl Default for EncodingLimits {
    /// Redis 7.4's defaults.
    fn default() -> Self {
        EncodingLimits {
            hash_entries: 512,
            hash_value: 64,
            set_intset_entries: 512,
            set_entries: 128,
            set_value: 64,
            zset_entries: 128,
            zset_value: 64,
            list_size: -2,
        }
    }
}
