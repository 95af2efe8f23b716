//! Write-behind on the command path, and its commands: WB.INFO, WB.ADD, WB.DEL, WB.DLQ.
//!
//! `admit` runs before a write command: a write to a mapped key whose log is full is refused
//! (`-BUSY`) before it changes the cache, and so is SQL.EXEC while an `sql_table` mapping's
//! log is full. `after_write` runs after every command: what the
//! change tap captured for it goes to the log files before the reply, and under `wb-fsync
//! always` the reply is deferred (through the client's mailbox, as SQL's replies are) until
//! a group fsync covers it. The engine itself is the `writeback` crate.

use std::sync::Arc;

use super::call::Body;
use super::{Command, Conn, Ctx};
use crate::shared::Shared;

/// The refusal of a write to a mapped key whose log is full.
const FULL: &[u8] = b"BUSY write-behind queue full";

/// Why `command` may not run now (its keys' mapping's log is full), if it may not.
pub(super) fn admit<B: Body>(
    shared: &Shared,
    command: &'static Command,
    body: &B,
) -> Option<&'static [u8]> {
    let mut refused = command.name == "sql.exec" && shared.writeback.admit_sql().is_err();
    body.for_each_key(command, &mut |key| {
        refused |= shared.writeback.admit(key).is_err();
    });
    refused.then_some(FULL)
}

/// Commits what the command captured; under `wb-fsync always` defers its reply (the bytes
/// from `reply_at` on) until the log is fsynced.
pub(super) fn after_write(shared: &Shared, conn: &mut Conn, out: &mut Vec<u8>, reply_at: usize) {
    let Some(durable) = shared.writeback.commit() else {
        return;
    };
    let reply = out.split_off(reply_at.min(out.len()));
    conn.waiting = true;
    let client = Arc::downgrade(&conn.client);
    durable.then(move || {
        if let Some(client) = client.upgrade() {
            client.post(&reply, true);
        }
    });
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

/// An `sql_table` mapping's table, if it exists, must have an INTEGER PRIMARY KEY: its rows
/// are written back keyed by it. (A table created later without one has its changes refused
/// into the dead-letter list.)
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
    // SQLite tells a deleted row by its rowid only: the key must be the rowid.
    let keys: Vec<_> = columns.iter().filter(|c| c.primary_key > 0).collect();
    match keys.as_slice() {
        [k] if k.decl_type.eq_ignore_ascii_case("INTEGER") => Ok(()),
        _ => Err(format!(
            "sql_table '{table}' needs an INTEGER PRIMARY KEY (one column): its rows are keyed by it in the database"
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

/// WB.DLQ name LIST | DROP: the dead-letter list (rows the database refused).
pub fn dlq(ctx: &mut Ctx<'_, '_>) {
    let name = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    let sub = ctx.arg(2).to_ascii_lowercase();
    let wb = &ctx.shared.writeback;
    match sub.as_slice() {
        b"list" => {
            let Some(letters) = wb.dead_letters(&name) else {
                return ctx.err(b"ERR no such write-behind mapping");
            };
            ctx.array(letters.len());
            for l in &letters {
                ctx.array(3);
                ctx.int(l.lsn as i64);
                ctx.bulk(&l.key);
                ctx.bulk(l.reason.as_bytes());
            }
        }
        b"drop" => match wb.drop_dead_letters(&name) {
            Some(n) => ctx.int(n as i64),
            None => ctx.err(b"ERR no such write-behind mapping"),
        },
        _ => ctx.err(b"ERR WB.DLQ subcommands: LIST, DROP"),
    }
}
