//! Write-behind on the command path, and its commands: WB.INFO, WB.ADD, WB.DEL, WB.DLQ.
//!
//! `admit` runs before a write command: a write to a mapped key whose log is full is refused
//! (`-BUSY`) before it changes the cache, and so is SQL.EXEC while an `sql_table` mapping's
//! log is full. `after_write` runs after every command: what the
//! change tap captured for it goes to the log files before the reply, and under `wb-fsync
//! always` the reply is deferred (through the client's mailbox, as SQL's replies are) until
//! a group fsync covers it; a command that changed keys of a write-through mapping has its
//! reply deferred until the database committed them, and turned into an error (its writes
//! undone) when the database refused one. The engine itself is the `writeback` crate.

use std::sync::Arc;

use store::Db;

use super::call::Body;
use super::{Command, Conn, Ctx};
use crate::shared::Shared;

/// The refusal of a write to a mapped key whose log is full.
const FULL: &[u8] = b"BUSY write-behind queue full";

/// Why `command` may not run now (its keys' mapping's log is full), if it may not. For keys
/// of a write-through mapping, notes their records before the command runs (read through
/// `db`, which may hold their shards: EXEC, scripts), so that a refused write can be undone.
pub(super) fn admit<B: Body>(
    shared: &Shared,
    command: &'static Command,
    body: &B,
    db: &mut Db<'_, '_>,
) -> Option<&'static [u8]> {
    let wb = &shared.writeback;
    // A replica's changes are not captured (its primary writes them back): nothing to note.
    let capturing = !shared.store.replica_mode();
    let mut refused = command.name == "sql.exec" && wb.admit_sql().is_err();
    // No log near its bound and no write-through mapping: no key to look at.
    if !wb.keys_need_admission() {
        return refused.then_some(FULL);
    }
    body.for_each_key(command, &mut |key| {
        let through = match wb.admit(key) {
            Ok(through) => through,
            Err(_) => {
                refused = true;
                false
            }
        };
        if through && capturing {
            let record = db.peek(key, |item| {
                item.map(|item| {
                    let mut record = Vec::new();
                    store::snapshot::encode_record(item, &mut record);
                    record
                })
            });
            wb.note_prev(key, record);
        }
    });
    refused.then_some(FULL)
}

/// Commits what the command captured; under `wb-fsync always` defers its reply (the bytes
/// from `reply_at` on) until the log is fsynced, and for write-through keys until the database
/// committed them. A write the database refused is undone and the reply becomes the error
/// `refuse` writes (the request's protocol's form).
pub(super) fn after_write(
    shared: &Shared,
    conn: &mut Conn,
    out: &mut Vec<u8>,
    reply_at: usize,
    refuse: fn(&mut Vec<u8>, &[u8]),
) {
    let Some(wait) = shared.writeback.commit() else {
        return;
    };
    let reply = out.split_off(reply_at.min(out.len()));
    conn.waiting = true;
    let client = Arc::downgrade(&conn.client);
    let store = shared.store.clone();
    wait.then(move |failed| {
        let Some(client) = client.upgrade() else {
            undo(&store, &failed);
            return;
        };
        match failed.is_empty() {
            true => client.post(&reply, true),
            false => {
                undo(&store, &failed);
                let mut error = Vec::new();
                refuse(&mut error, &failure_message(&failed));
                client.post(&error, true)
            }
        };
    });
}

/// Puts back the previous record of each write the database refused, unless another write
/// changed the key since (its CAS is no longer the one the refused write gave it).
fn undo(store: &store::Store, failed: &[writeback::Failed]) {
    for f in failed.iter().filter(|f| f.refused) {
        let Some(prev) = &f.undo.prev else {
            continue;
        };
        let still = |now: Option<store::Item<'_>>| now.map(|i| i.cas()) == f.undo.cas;
        if let Err(e) = store.restore_if(store::Author::SERVER, &f.undo.key, prev.as_deref(), still)
        {
            tracing::error!(
                "write-through: putting back {}: {e}",
                String::from_utf8_lossy(&f.undo.key)
            );
        }
    }
}

/// The error a writer gets: the first failure's (the database's message on one line).
fn failure_message(failed: &[writeback::Failed]) -> Vec<u8> {
    let first = &failed[0];
    let why: String = first
        .reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let more = match failed.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    let what = if first.refused { "refused" } else { "pending" };
    format!(
        "ERR write-through {what}: {}: {why}{more}",
        String::from_utf8_lossy(&first.undo.key)
    )
    .into_bytes()
}

fn pairs_from(ctx: &Ctx<'_, '_>, from: usize) -> Vec<(String, String)> {
    let text = |i: usize| String::from_utf8_lossy(ctx.arg(i)).into_owned();
    (from..ctx.argc())
        .step_by(2)
        .map(|i| (text(i), text(i + 1)))
        .collect()
}

/// WB.ADD name key value [key value ...]: adds a mapping at run time.
pub fn add(ctx: &mut Ctx<'_, '_>) {
    if !ctx.argc().is_multiple_of(2) {
        return ctx.err(b"ERR WB.ADD takes a name and key value pairs");
    }
    let name = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    let pairs = pairs_from(ctx, 2);
    let added = writeback::MappingConfig::from_pairs(&name, &pairs)
        .and_then(|config| keyed_table(ctx.shared, &config).map(|()| config))
        .and_then(|config| ctx.shared.writeback.add(config));
    match added {
        Ok(()) => {
            ctx.shared
                .store
                .set_listening(store::Listener::WriteBack, true);
            ctx.ok()
        }
        Err(e) => ctx.err(format!("ERR {e}").as_bytes()),
    }
}

/// An `sql_table` mapping's table, if it exists, must have a primary key (of any columns): its
/// rows are written back keyed by it. (A table created later without one has its changes
/// refused into the dead-letter list.)
fn keyed_table(shared: &Shared, config: &writeback::MappingConfig) -> Result<(), String> {
    let (Some(table), Some(sql)) = (&config.sql_table, &shared.sql) else {
        return Ok(());
    };
    let describe = sql::Request::Describe {
        table: table.clone(),
    };
    let Ok(sql::Reply::Describe(columns)) = sql.run(describe) else {
        return Ok(()); // no such table yet
    };
    match columns.iter().any(|c| c.primary_key > 0) {
        true => Ok(()),
        false => Err(format!(
            "sql_table '{table}' needs a PRIMARY KEY: its rows are keyed by it in the database"
        )),
    }
}

/// WB.DEL name: removes a mapping (its log stays on disk).
pub fn del(ctx: &mut Ctx<'_, '_>) {
    let name = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    if !ctx.shared.writeback.remove(&name) {
        return ctx.err(b"ERR no such write-behind mapping");
    }
    if !ctx.shared.writeback.active() {
        ctx.shared
            .store
            .set_listening(store::Listener::WriteBack, false);
    }
    ctx.ok()
}

/// WB.INFO [name]: each mapping's configuration and state, as a map per mapping.
pub fn info(ctx: &mut Ctx<'_, '_>) {
    let name = (ctx.argc() > 1).then(|| String::from_utf8_lossy(ctx.arg(1)).into_owned());
    let Some(list) = ctx.shared.writeback.info(name.as_deref()) else {
        return ctx.err(b"ERR no such write-behind mapping");
    };
    if name.is_some() {
        let (_, fields) = &list[0];
        return reply_map(ctx, fields);
    }
    ctx.map(list.len());
    for (name, fields) in &list {
        ctx.bulk(name.as_bytes());
        reply_map(ctx, fields);
    }
}

fn reply_map(ctx: &mut Ctx<'_, '_>, fields: &[(String, String)]) {
    ctx.map(fields.len());
    for (k, v) in fields {
        ctx.bulk(k.as_bytes());
        ctx.bulk(v.as_bytes());
    }
}

/// WB.DLQ name LIST [count] | DROP [lsn ...] | RETRY [lsn ...]: the dead-letter list (changes
/// the database refused), kept in the database (docs/writebehind.md, "Dead letters").
pub fn dlq(ctx: &mut Ctx<'_, '_>) {
    let name = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    let sub = ctx.arg(2).to_ascii_lowercase();
    if ctx.shared.writeback.get(&name).is_none() {
        return ctx.err(b"ERR no such write-behind mapping");
    }
    match sub.as_slice() {
        b"list" => dlq_list(ctx, &name),
        b"drop" | b"retry" => {
            let mut lsns = Vec::new();
            for i in 3..ctx.argc() {
                match super::parse_i64(ctx.arg(i)) {
                    Some(n) if n > 0 => lsns.push(n as u64),
                    _ => {
                        return ctx
                            .err(b"ERR a dead letter's number (its LSN) is a positive integer")
                    }
                }
            }
            let lsns = (ctx.argc() > 3).then_some(lsns);
            if sub == b"retry" {
                return dlq_retry(ctx, &name, lsns.as_deref());
            }
            let taken = ctx
                .shared
                .writeback
                .take_dead_letters(&name, lsns.as_deref());
            ctx.int(taken.map_or(0, |t| t.len()) as i64)
        }
        _ => ctx.err(b"ERR WB.DLQ subcommands: LIST [count], DROP [lsn ...], RETRY [lsn ...]"),
    }
}

/// Newest first: `[lsn, key, reason, value, time_ms]` each.
fn dlq_list(ctx: &mut Ctx<'_, '_>, name: &str) {
    let count = match ctx.argc() {
        3 => usize::MAX,
        4 => match super::parse_i64(ctx.arg(3)) {
            Some(n) if n >= 0 => n as usize,
            _ => return ctx.err(super::NOT_INTEGER),
        },
        _ => return ctx.err(b"ERR syntax error: WB.DLQ name LIST [count]"),
    };
    let letters = ctx
        .shared
        .writeback
        .dead_letters(name, count)
        .unwrap_or_default();
    ctx.array(letters.len());
    for l in &letters {
        ctx.array(5);
        ctx.int(l.lsn as i64);
        ctx.bulk(&l.key);
        ctx.bulk(l.reason.as_bytes());
        ctx.bulk(&l.value);
        ctx.int(l.time_ms as i64);
    }
}

/// Retries letters by re-capturing each one's key as the cache holds it NOW, with a new log
/// number, then removing the letters. Never the letter's own (old) value: the key may have
/// changed since, and that old value would then overwrite a newer row. A key the cache no
/// longer holds is not re-captured: a later delete of it is in the log already, and an
/// eviction or expiry does not change the database. Replies the letters retried.
fn dlq_retry(ctx: &mut Ctx<'_, '_>, name: &str, lsns: Option<&[u64]>) {
    if ctx.shared.store.replica_mode() {
        return ctx.err(b"ERR a replica leaves write-behind to its primary");
    }
    if matches!(ctx.db, store::Db::Locked(_)) {
        return ctx.err(b"ERR WB.DLQ RETRY is not allowed in a transaction");
    }
    let wb = ctx.shared.writeback.clone();
    let mut chosen = wb.dead_letters(name, usize::MAX).unwrap_or_default();
    if let Some(lsns) = lsns {
        chosen.retain(|l| lsns.contains(&l.lsn));
    }
    let mut keys: Vec<Vec<u8>> = chosen.iter().map(|l| l.key.clone()).collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.iter().any(|k| wb.admit(k).is_err()) {
        return ctx.err(FULL);
    }
    for key in &keys {
        // Under the key's shard lock, as the change tap captures: numbered in the store's
        // order with the key's other writes.
        ctx.db.write(key, |entry| {
            if let Some(item) = entry.item() {
                let op = crate::wb_tap::op_of(item.kind());
                wb.capture(key, op, &item.portable_value(), || None);
            }
        });
    }
    let numbers: Vec<u64> = chosen.iter().map(|l| l.lsn).collect();
    let taken = wb.take_dead_letters(name, Some(&numbers));
    ctx.int(taken.map_or(0, |t| t.len()) as i64)
}
