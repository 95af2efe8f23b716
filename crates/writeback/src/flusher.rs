//! A mapping's flusher thread: reads the log from the database's checkpoint on, waits until
//! the oldest record read is `delay` old (so a key's changes within the window coalesce into
//! its last one), and applies up to `batch` keys per transaction, the checkpoint with them.
//!
//! The database down: it retries the same batch with backoff, forever, while the log grows.
//! The database refusing data: the batch is retried `retries` times with backoff, then applied
//! row by row and the refused rows go to the dead-letter list; the rest flows.
//!
//! A write-through mapping (`mode = "through"`) differs in three ways, all so that each
//! waiting writer learns its own record's fate at once: no `delay` (a batch is whatever is
//! written when the flusher looks, a group commit), no coalescing (a key's second change
//! starts the next batch), and a refused batch goes row by row at once, the refused rows
//! answered to their writers (`through`) rather than dead-lettered.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use crate::db::{connect, decode_sql_row, row_columns, DbError, Driver, Row, RowChange};
use crate::log::{now_micros, OpKind, Record};
use crate::{DeadLetter, Mapping};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

fn backoff(attempt: u32) -> Duration {
    BACKOFF_MIN
        .saturating_mul(1 << attempt.min(10))
        .min(BACKOFF_MAX)
}

pub(crate) fn run(mapping: Arc<Mapping>) {
    let mut driver: Option<Box<dyn Driver>> = None;
    let mut reader = mapping.log.reader();
    let mut checkpoint = None;
    let mut failures = 0u32;
    let mut refusals = 0u32;
    let through = mapping.through();
    while !mapping.stopped() {
        mapping.expire_waiters();
        // Connected, with the checkpoint read?
        let db = match driver.as_mut() {
            Some(d) => d,
            None => match connect(&mapping.config).and_then(|mut d| {
                let c = d.checkpoint(&mapping.config.name)?;
                mapping.sync_dead_letters(d.as_mut(), true)?;
                Ok((d, c))
            }) {
                Ok((d, c)) => {
                    failures = 0;
                    checkpoint = Some(c);
                    mapping.stats.checkpoint.store(c, Relaxed);
                    reader = mapping.log.reader();
                    driver = Some(d);
                    continue;
                }
                Err(e) => {
                    failures += 1;
                    mapping.failed(&e);
                    mapping.sleep(backoff(failures));
                    continue;
                }
            },
        };
        let done = checkpoint.unwrap_or(0);
        let start = reader.position();
        // Durable records only: a record applied must never be lost from the log by a crash,
        // or its number could be given again after a restart.
        let durable = match durable(&mapping, done) {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("write-behind {}: fsync failed: {e}", mapping.config.name);
                mapping.sleep(BACKOFF_MAX);
                continue;
            }
        };
        // Letters taken by WB.DLQ leave the database now (after the fsync above, so that a
        // RETRY's re-captured change is on disk before its letter is gone).
        if let Err(e) = mapping.sync_dead_letters(db.as_mut(), false) {
            failures += 1;
            mapping.failed(&e);
            if e.connection {
                driver = None;
            }
            mapping.sleep(backoff(failures));
            continue;
        }
        let first = match next_after(&mut reader, done, durable) {
            Ok(Some(r)) => r,
            Ok(None) => {
                mapping.stats.oldest_micros.store(0, Relaxed);
                mapping
                    .log
                    .wait_written(durable, Duration::from_millis(200));
                continue;
            }
            Err(e) => {
                tracing::error!("write-behind {}: reading the log: {e}", mapping.config.name);
                mapping.sleep(BACKOFF_MAX);
                continue;
            }
        };
        mapping.stats.oldest_micros.store(first.micros, Relaxed);
        // Let the window pass, so that later changes of the same keys coalesce.
        let due = first.micros + mapping.config.delay.as_micros() as u64;
        let now = now_micros();
        if due > now && !through {
            mapping.sleep(Duration::from_micros(due - now));
            let _ = reader.seek(start);
            continue;
        }
        let durable = self::durable(&mapping, done).unwrap_or(durable);
        let mut rows: Vec<Row> = Vec::new();
        // The record each row comes from: its dead letter, should the database refuse it.
        let mut sources: Vec<Record> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut last = first.lsn;
        let mut dead: Vec<DeadLetter> = Vec::new();
        let mut record = Some(first);
        while let Some(r) = record.take() {
            let slot = index.get(&r.key).copied();
            if slot.is_none() && rows.len() >= mapping.config.batch {
                // Not in this batch: read again next time.
                break;
            }
            last = r.lsn;
            let pos = reader.position();
            match to_row(&mapping, &r) {
                Ok(None) => {}
                Ok(Some(row)) => match slot {
                    Some(i) => {
                        rows[i] = row;
                        sources[i] = r;
                    }
                    None => {
                        index.insert(r.key.clone(), rows.len());
                        rows.push(row);
                        sources.push(r);
                    }
                },
                Err(why) => {
                    // Cannot become a row at all (not text, wrong type): dead at once. An
                    // earlier change of the key in this batch is dropped too (it is older).
                    if let Some(i) = slot {
                        rows[i].change = RowChange::Delete;
                        rows[i].lsn = 0;
                    }
                    dead.push(DeadLetter::of(&r, &why));
                }
            }
            match next_after(&mut reader, done, durable) {
                Ok(Some(n)) if next_in_batch(&index, &n, rows.len(), &mapping) => record = Some(n),
                Ok(_) => {
                    let _ = reader.seek(pos);
                }
                Err(_) => {
                    let _ = reader.seek(pos);
                }
            }
        }
        let (rows, sources): (Vec<Row>, Vec<Record>) = rows
            .into_iter()
            .zip(sources)
            .filter(|(row, _)| row.lsn != 0)
            .unzip();
        match db.apply(&mapping.config, &rows, &dead, last) {
            Ok(n) => {
                refusals = 0;
                mapping.applied(n, last, dead);
                checkpoint = Some(last);
            }
            Err(e) if e.connection => {
                failures += 1;
                mapping.failed(&e);
                driver = None;
                mapping.sleep(backoff(failures));
                let _ = reader.seek(start);
            }
            Err(e) => {
                refusals += 1;
                mapping.failed(&e);
                // Write-through writers wait: no retries of what the database refuses.
                if refusals < mapping.config.retries && !through {
                    mapping.sleep(backoff(refusals));
                    let _ = reader.seek(start);
                    continue;
                }
                let letters: Vec<DeadLetter> =
                    sources.iter().map(|r| DeadLetter::of(r, "")).collect();
                match db.apply_each(&mapping.config, &rows, &dead, &letters, last) {
                    Ok((n, stored)) => {
                        refusals = 0;
                        mapping.applied(n, last, stored);
                        checkpoint = Some(last);
                    }
                    Err(e) => {
                        mapping.failed(&e);
                        if e.connection {
                            driver = None;
                        }
                        mapping.sleep(backoff(refusals));
                        let _ = reader.seek(start);
                    }
                }
            }
        }
    }
}

/// The last record the flusher may apply now: records fsynced only. A backlog of a batch or
/// more already fsynced (by the once-a-second syncer or an earlier turn) is applied without
/// another fsync; else the log is fsynced first, so that a turn applies what was written
/// before it, as soon as `delay` allows. One fsync so covers a backlog's many batches instead
/// of costing one per batch while writes stream in. Write-through fsyncs every turn: its
/// writers wait for their own records.
fn durable(mapping: &Mapping, done: u64) -> std::io::Result<u64> {
    let synced = mapping.log.synced();
    if !mapping.through() && synced.saturating_sub(done) >= mapping.config.batch as u64 {
        return Ok(synced);
    }
    mapping.log.sync()
}

/// Whether record `n` joins the batch of `rows` rows (`index`: their keys): under write-behind
/// a change of a key already in it (it coalesces) or a new key while there is room; under
/// write-through only a new key, so that each record is applied (and answered) on its own.
fn next_in_batch(
    index: &HashMap<Vec<u8>, usize>,
    n: &Record,
    rows: usize,
    mapping: &Mapping,
) -> bool {
    match index.contains_key(&n.key) {
        true => !mapping.through(),
        false => rows < mapping.config.batch,
    }
}

/// The next record after the checkpoint `done`, up to the durable `upto`.
fn next_after(
    reader: &mut crate::log::Reader,
    done: u64,
    upto: u64,
) -> std::io::Result<Option<Record>> {
    loop {
        match reader.next(upto)? {
            Some(r) if r.lsn <= done => continue,
            other => return Ok(other),
        }
    }
}

/// The row change a record asks for; None for a record that changes nothing (a mark).
fn to_row(mapping: &Mapping, r: &Record) -> Result<Option<Row>, String> {
    if r.op == OpKind::Mark {
        return Ok(None);
    }
    let id = std::str::from_utf8(&r.key[mapping.config.prefix.len().min(r.key.len())..])
        .map_err(|_| "key is not UTF-8 text".to_string())?
        .to_string();
    // An SQL row's record names its primary key columns and values; a key's row is named by
    // the mapping's key column.
    let key = if mapping.config.sql_table.is_some() {
        let (key, _) = decode_sql_row(&r.value)?;
        if key.is_empty() {
            return Err("the row record names no primary key column".into());
        }
        key.into_iter()
            .map(|(name, v)| match v {
                Some(v) => Ok((name, v)),
                None => Err(format!("primary key column '{name}' is NULL")),
            })
            .collect::<Result<Vec<_>, String>>()?
    } else {
        vec![(mapping.config.key_column.clone(), id.clone())]
    };
    let change = match r.op {
        OpKind::Delete => RowChange::Delete,
        op => RowChange::Upsert(row_columns(&mapping.config, op, &r.value)?),
    };
    Ok(Some(Row {
        key,
        id,
        lsn: r.lsn,
        change,
    }))
}

impl Mapping {
    fn failed(&self, e: &DbError) {
        self.stats.retries.fetch_add(1, Relaxed);
        let mut last = self.stats.last_error.lock();
        if last.as_deref() != Some(e.message.as_str()) {
            tracing::warn!("write-behind {}: {}", self.config.name, e.message);
        }
        *last = Some(e.message.clone());
    }

    /// A batch committed: `dead` are in the database with the checkpoint.
    fn applied(&self, rows: u64, checkpoint: u64, dead: Vec<DeadLetter>) {
        self.stats.rows_written.fetch_add(rows, Relaxed);
        self.stats.batches.fetch_add(1, Relaxed);
        if self.config.read_through {
            self.reads.applied(checkpoint);
        }
        *self.stats.last_error.lock() = None;
        // Write-through: the refused records' writers are told (and their writes undone), and
        // their letters leave the database again (the writer knows); a refused record nobody
        // waits for (its writer timed out, or it was replayed after a restart) is a dead
        // letter as under write-behind.
        let refused: HashMap<u64, String> =
            dead.iter().map(|l| (l.lsn, l.reason.clone())).collect();
        let told = self.waiters.settle(checkpoint, &refused);
        if !told.is_empty() {
            let mut list = self.dead.lock();
            for lsn in &told {
                list.discard(*lsn);
            }
        }
        // The letters before the checkpoint: whoever sees the queue drained sees them too.
        for letter in dead.into_iter().filter(|l| !told.contains(&l.lsn)) {
            tracing::error!(
                "write-behind {}: key {} (log #{}) refused, moved to the dead-letter list: {}",
                self.config.name,
                String::from_utf8_lossy(&letter.key),
                letter.lsn,
                letter.reason
            );
            self.dead_letter(letter);
        }
        self.stats.checkpoint.store(checkpoint, Relaxed);
        if let Err(e) = self.log.truncate(checkpoint) {
            tracing::warn!(
                "write-behind {}: removing applied log: {e}",
                self.config.name
            );
        }
    }

    /// Deletes from the database the letters WB.DLQ took; with `load`, then reads the
    /// database's letters into the in-memory copy (at connect).
    fn sync_dead_letters(&self, db: &mut dyn Driver, load: bool) -> Result<(), DbError> {
        let drops = self.dead.lock().pending_drops();
        if !drops.is_empty() {
            db.drop_dead_letters(&self.config.name, &drops)?;
            self.dead.lock().dropped(&drops);
        }
        if load {
            let letters = db.dead_letters(&self.config.name, crate::DEAD_MAX)?;
            self.dead.lock().load(letters);
        }
        Ok(())
    }
}
