//! A mapping's dead letters: the changes the database refused (or that could not become a row).
//!
//! The database holds them (`cairn_wb_dead`), each inserted in the same transaction as the
//! checkpoint that skips its change, so a crash neither loses nor repeats one; at most
//! [`DEAD_MAX`] per mapping, the newest kept. This is the flusher's copy of them, which
//! `WB.DLQ` reads without a database call: loaded when the flusher connects, grown by every
//! batch that commits letters. Letters taken by `WB.DLQ DROP | RETRY` leave the copy at once
//! and the database at the flusher's next turn (until then they are `dropped`, so that a
//! reload cannot bring them back).

use std::collections::{BTreeMap, BTreeSet};

use crate::log::{now_micros, OpKind, Record};

/// Dead letters kept per mapping, in the database and in memory: the newest ones.
pub const DEAD_MAX: usize = 10_000;

/// One dead letter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    /// The refused change's log number.
    pub lsn: u64,
    pub key: Vec<u8>,
    /// The refused value, for a reader (see [`describe`]): not applied again by a retry.
    pub value: Vec<u8>,
    pub reason: String,
    /// When it became a dead letter, milliseconds since the epoch.
    pub time_ms: u64,
}

impl DeadLetter {
    pub fn of(r: &Record, reason: &str) -> DeadLetter {
        DeadLetter {
            lsn: r.lsn,
            key: r.key.clone(),
            value: describe(r.op, &r.value),
            reason: reason.to_string(),
            time_ms: now_micros() / 1000,
        }
    }
}

/// A record's value as an operator reads it: a string as it is, a hash as `field=value`
/// lines (an SQL row likewise, its columns), nothing for a delete or a collection.
pub fn describe(op: OpKind, value: &[u8]) -> Vec<u8> {
    match op {
        OpKind::String => value.to_vec(),
        OpKind::Hash => {
            let mut out = Vec::new();
            for (field, v) in store::hash::fields(value) {
                if !out.is_empty() {
                    out.push(b'\n');
                }
                out.extend_from_slice(field);
                out.push(b'=');
                out.extend_from_slice(v);
            }
            out
        }
        OpKind::Row => {
            let columns: crate::db::Text = crate::db::decode_sql_row(value)
                .map(|(key, rest)| key.into_iter().chain(rest).collect())
                .unwrap_or_default();
            let lines: Vec<String> = columns
                .into_iter()
                .map(|(name, v)| format!("{name}={}", v.as_deref().unwrap_or("NULL")))
                .collect();
            lines.join("\n").into_bytes()
        }
        OpKind::Delete | OpKind::Collection | OpKind::Mark => Vec::new(),
    }
}

/// The in-memory copy of a mapping's letters.
#[derive(Default)]
pub(crate) struct DeadList {
    letters: BTreeMap<u64, DeadLetter>,
    /// Taken by a command, not yet deleted from the database.
    dropped: BTreeSet<u64>,
}

impl DeadList {
    pub(crate) fn add(&mut self, letter: DeadLetter) {
        self.letters.insert(letter.lsn, letter);
        while self.letters.len() > DEAD_MAX {
            self.letters.pop_first();
        }
    }

    /// Replaces the copy with the database's letters (less those taken meanwhile).
    pub(crate) fn load(&mut self, letters: Vec<DeadLetter>) {
        self.letters = letters
            .into_iter()
            .filter(|l| !self.dropped.contains(&l.lsn))
            .map(|l| (l.lsn, l))
            .collect();
    }

    pub(crate) fn len(&self) -> usize {
        self.letters.len()
    }

    /// Newest first, at most `count`.
    pub(crate) fn newest(&self, count: usize) -> Vec<DeadLetter> {
        self.letters.values().rev().take(count).cloned().collect()
    }

    /// Takes the letters numbered `lsns` (all of them: None); they are deleted from the
    /// database later ([`DeadList::pending_drops`]).
    pub(crate) fn take(&mut self, lsns: Option<&[u64]>) -> Vec<DeadLetter> {
        let chosen: Vec<u64> = match lsns {
            None => self.letters.keys().copied().collect(),
            Some(l) => l
                .iter()
                .copied()
                .filter(|n| self.letters.contains_key(n))
                .collect(),
        };
        let mut taken = Vec::with_capacity(chosen.len());
        for n in chosen {
            if let Some(l) = self.letters.remove(&n) {
                self.dropped.insert(n);
                taken.push(l);
            }
        }
        taken
    }

    /// A letter stored with its checkpoint that is not one after all (a write-through writer
    /// was told of its refusal): deleted from the database on the next turn.
    pub(crate) fn discard(&mut self, lsn: u64) {
        self.letters.remove(&lsn);
        self.dropped.insert(lsn);
    }

    /// The numbers to delete from the database (they stay pending until [`DeadList::dropped`]).
    pub(crate) fn pending_drops(&self) -> Vec<u64> {
        self.dropped.iter().copied().collect()
    }

    /// `lsns` are deleted from the database.
    pub(crate) fn dropped(&mut self, lsns: &[u64]) {
        for n in lsns {
            self.dropped.remove(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(lsn: u64) -> DeadLetter {
        DeadLetter {
            lsn,
            key: format!("k{lsn}").into_bytes(),
            value: Vec::new(),
            reason: "no".into(),
            time_ms: 0,
        }
    }

    #[test]
    fn keeps_the_newest_and_lists_newest_first() {
        let mut d = DeadList::default();
        for n in 1..=(DEAD_MAX as u64 + 5) {
            d.add(letter(n));
        }
        let all = d.newest(usize::MAX);
        assert_eq!(all.len(), DEAD_MAX);
        assert_eq!(all[0].lsn, DEAD_MAX as u64 + 5);
        assert_eq!(all.last().unwrap().lsn, 6);
        assert_eq!(d.newest(2).len(), 2);
    }

    #[test]
    fn taken_letters_do_not_come_back_with_a_reload() {
        let mut d = DeadList::default();
        for n in [3, 5, 9] {
            d.add(letter(n));
        }
        let taken = d.take(Some(&[5, 42]));
        assert_eq!(taken.iter().map(|l| l.lsn).collect::<Vec<_>>(), vec![5]);
        assert_eq!(d.pending_drops(), vec![5]);
        d.load(vec![letter(3), letter(5), letter(9)]);
        assert_eq!(
            d.newest(10).iter().map(|l| l.lsn).collect::<Vec<_>>(),
            vec![9, 3]
        );
        d.dropped(&[5]);
        assert!(d.pending_drops().is_empty());
        assert_eq!(d.take(None).len(), 2);
    }

    #[test]
    fn a_hash_reads_as_field_lines() {
        let mut enc = Vec::new();
        store::hash::push(&mut enc, b"name", b"x");
        store::hash::push(&mut enc, b"age", b"1");
        assert_eq!(describe(OpKind::Hash, &enc), b"name=x\nage=1".to_vec());
        assert_eq!(describe(OpKind::Delete, b"zz"), Vec::<u8>::new());
    }
}
