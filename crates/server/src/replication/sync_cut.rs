//! What a replica loaded by a full sync skips of the stream that follows: the records its
//! snapshot already reflects. A primary copies a shard in parts, each under the shard's lock
//! on its own and each with its own cut (the shard's sequence number then; META's part cuts,
//! docs/snapshot-format.md): a record of shard `s` numbered `q` is in the copy exactly when
//! `q` is at or below the cut of the part whose hash range holds the record's key. Skipping
//! exactly those, the replica takes every key through the same values as the primary did,
//! never back to an older one (docs/replication.md, "Full sync").

use store::snapshot_parts::{part_seq, PartCut, PartHasher, PROBE_KEY};

use crate::snapshot::PartCuts;

use super::encode::Place;

/// One log's cut: records at or below `first` are all in the copy, none above `last`; in
/// between, the key's part decides.
#[derive(Debug, Default)]
struct LogCut {
    first: u64,
    last: u64,
    parts: Vec<PartCut>,
}

/// Per log of the primary (its shards, then the SQL log), what the snapshot holds.
#[derive(Default)]
pub struct SyncCut {
    logs: Vec<LogCut>,
    /// The primary's key positions; None without part cuts.
    hasher: Option<PartHasher>,
}

impl SyncCut {
    /// Nothing is skipped: the snapshot matched the stream's offset exactly.
    pub fn none() -> SyncCut {
        SyncCut::default()
    }

    /// From a loaded snapshot: each shard's first cut (`shards`), the SQL log's position, and
    /// the part cuts when the primary sent them. Part cuts this replica cannot use (a hash that
    /// differs from the primary's, as the probe key's position shows, or a shard count that
    /// does not match) are dropped: each shard then skips only up to its first cut, and
    /// replays the rest (a key changed during the copy reads older for a moment).
    pub fn loaded(shards: Vec<u64>, sql: u64, parts: Option<PartCuts>) -> SyncCut {
        let parts = parts.filter(|p| {
            let usable = p.shards.len() == shards.len()
                && PartHasher::new(p.seeds).position(PROBE_KEY) == p.probe;
            if !usable {
                tracing::warn!(
                    "full sync: the primary's part cuts do not fit this replica (another \
                     hash or shard count); the changes made during the copy are replayed"
                );
            }
            usable
        });
        let hasher = parts.as_ref().map(|p| PartHasher::new(p.seeds));
        let mut per_shard = parts.map(|p| p.shards).unwrap_or_default().into_iter();
        let mut logs: Vec<LogCut> = shards
            .into_iter()
            .map(|first| {
                let parts = per_shard.next().unwrap_or_default();
                let last = parts
                    .iter()
                    .map(|p| p.seq)
                    .max()
                    .unwrap_or(first)
                    .max(first);
                LogCut { first, last, parts }
            })
            .collect();
        logs.push(LogCut {
            first: sql,
            last: sql,
            parts: Vec::new(),
        });
        SyncCut { logs, hasher }
    }

    /// Whether the change at `place` is already in the data (and is skipped). A flush that is
    /// applied empties every shard at its flush's seq: from there on nothing of the shards is
    /// skipped (their copies are gone).
    pub fn skip(&mut self, place: &Place<'_>) -> bool {
        match place {
            Place::Record { log, seq, key } => {
                let Some(cut) = self.logs.get(*log) else {
                    return false;
                };
                if *seq > cut.last {
                    return false;
                }
                if *seq <= cut.first {
                    return true;
                }
                match (key, &self.hasher) {
                    (Some(key), Some(hasher)) => {
                        part_seq(&cut.parts, hasher.position(key)).is_some_and(|c| *seq <= c)
                    }
                    _ => false,
                }
            }
            Place::Flush(seqs) => {
                if self.logs.is_empty() {
                    return false;
                }
                // Skipped when every part of every shard was copied after its shard's flush.
                if seqs.iter().zip(&self.logs).all(|(f, cut)| *f <= cut.first) {
                    return true;
                }
                for (f, cut) in seqs.iter().zip(&mut self.logs) {
                    *cut = LogCut {
                        first: *f,
                        last: *f,
                        parts: Vec::new(),
                    };
                }
                false
            }
            Place::None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(log: usize, seq: u64, key: &[u8]) -> Place<'_> {
        Place::Record {
            log,
            seq,
            key: Some(key),
        }
    }

    #[test]
    fn without_parts_a_log_skips_up_to_its_cut() {
        let mut cut = SyncCut::loaded(vec![5, 0], 9, None);
        assert!(cut.skip(&record(0, 5, b"k")));
        assert!(!cut.skip(&record(0, 6, b"k")));
        assert!(!cut.skip(&record(1, 1, b"k")));
        assert!(cut.skip(&Place::Record {
            log: 2,
            seq: 9,
            key: None
        }));
        assert!(!cut.skip(&record(3, 1, b"k")), "a log it does not know");
        assert!(!SyncCut::none().skip(&record(1, 1, b"k")));
        assert!(!cut.skip(&Place::None));
        assert!(!SyncCut::none().skip(&Place::Flush(vec![1])));
    }

    /// Two parts of shard 0: positions below 2^31 copied at seq 10, the rest at seq 20.
    fn two_parts(seeds: [u64; 4]) -> (SyncCut, PartHasher) {
        let hasher = PartHasher::new(seeds);
        let parts = PartCuts {
            seeds,
            probe: hasher.position(PROBE_KEY),
            shards: vec![
                vec![
                    PartCut {
                        hi: 1 << 31,
                        seq: 10,
                    },
                    PartCut {
                        hi: 1 << 32,
                        seq: 20,
                    },
                ],
                vec![PartCut {
                    hi: 1 << 32,
                    seq: 3,
                }],
            ],
        };
        (SyncCut::loaded(vec![10, 3], 0, Some(parts)), hasher)
    }

    #[test]
    fn between_the_first_and_last_part_cut_the_keys_part_decides() {
        let seeds = [7, 8, 9, 10];
        let (mut cut, hasher) = two_parts(seeds);
        let key_in = |low: bool| {
            (0..)
                .map(|i| format!("k{i}"))
                .find(|k| (hasher.position(k.as_bytes()) < 1 << 31) == low)
                .unwrap()
        };
        let (low, high) = (key_in(true), key_in(false));
        assert!(cut.skip(&record(0, 10, low.as_bytes())));
        assert!(
            !cut.skip(&record(0, 11, low.as_bytes())),
            "after its part's copy"
        );
        assert!(
            cut.skip(&record(0, 15, high.as_bytes())),
            "its part was copied later"
        );
        assert!(cut.skip(&record(0, 20, high.as_bytes())));
        assert!(!cut.skip(&record(0, 21, high.as_bytes())));
        assert!(!cut.skip(&Place::Record {
            log: 0,
            seq: 15,
            key: None
        }));
        // A hash this replica does not share (the probe differs): the first cut only.
        let (mut other, _) = two_parts(seeds);
        other.hasher = None;
        assert!(!other.skip(&record(0, 15, high.as_bytes())));
        let mut parts = PartCuts {
            seeds,
            probe: hasher.position(PROBE_KEY).wrapping_add(1),
            shards: vec![vec![], vec![]],
        };
        assert!(SyncCut::loaded(vec![10, 3], 0, Some(parts.clone()))
            .hasher
            .is_none());
        parts.probe = parts.probe.wrapping_sub(1);
        parts.shards.pop();
        assert!(SyncCut::loaded(vec![10, 3], 0, Some(parts))
            .hasher
            .is_none());
    }

    #[test]
    fn a_flush_after_some_part_applies_and_then_nothing_is_skipped() {
        let (mut cut, _) = two_parts([1, 2, 3, 4]);
        assert!(cut.skip(&Place::Flush(vec![10, 3])), "every part after it");
        assert!(!cut.skip(&Place::Flush(vec![15, 3])));
        assert!(!cut.skip(&record(0, 16, b"any")));
        assert!(cut.skip(&record(0, 15, b"any")));
        assert!(!cut.skip(&record(1, 4, b"any")));
    }
}
