//! MULTI / EXEC / DISCARD / WATCH / UNWATCH.
//!
//! EXEC locks every shard, checks the watched keys' CAS versions, then runs the queue against
//! the locked keyspace, so no other client observes or interleaves with a transaction. WATCH
//! remembers each key's version (or its absence); every write gives a record a new version, even
//! one that keeps or sets the memcached CAS (`touch`, `ms ... E`), so a changed version means
//! the key was touched. (A key deleted and re-created absent again in between is
//! not detected; Redis would abort in that case.)

use super::{lookup, Caller, Ctx, OwnedArgs, Resp};

pub fn multi(ctx: &mut Ctx<'_, '_>) {
    if ctx.conn.multi.is_some() {
        return ctx.err(b"ERR MULTI calls can not be nested");
    }
    ctx.conn.multi = Some(Vec::new());
    ctx.conn.multi_dirty = false;
    // CLIENT LIST multi-mem counts this transaction's queue only.
    ctx.conn
        .client
        .state
        .multi_mem
        .store(0, std::sync::atomic::Ordering::Relaxed);
    ctx.ok()
}

pub fn discard(ctx: &mut Ctx<'_, '_>) {
    if ctx.conn.multi.take().is_none() {
        return ctx.err(b"ERR DISCARD without MULTI");
    }
    ctx.conn.watched.clear();
    ctx.ok()
}

pub fn watch(ctx: &mut Ctx<'_, '_>) {
    if ctx.conn.multi.is_some() {
        return ctx.err(b"ERR WATCH inside MULTI is not allowed");
    }
    for i in 1..ctx.argc() {
        let key = ctx.args.get(i);
        let version = ctx.db.watch_version(key);
        ctx.conn.watched.push((key.to_vec(), version));
    }
    ctx.ok()
}

pub fn unwatch(ctx: &mut Ctx<'_, '_>) {
    ctx.conn.watched.clear();
    ctx.ok()
}

pub fn exec(ctx: &mut Ctx<'_, '_>) {
    let Some(queue) = ctx.conn.multi.take() else {
        return ctx.err(b"ERR EXEC without MULTI");
    };
    let watched = std::mem::take(&mut ctx.conn.watched);
    if std::mem::take(&mut ctx.conn.multi_dirty) {
        return ctx.err(b"EXECABORT Transaction discarded because of previous errors.");
    }
    let store = ctx.db.store();
    let mut locked = store.lock_all(ctx.db.author());
    for (key, version) in &watched {
        if locked.watch_version(key) != *version {
            return ctx.nil_array();
        }
    }
    ctx.array(queue.len());
    ctx.conn.in_exec = true;
    for queued in &queue {
        run_queued(ctx, queued, &mut locked);
    }
    ctx.conn.in_exec = false;
    drop(locked);
    if let Some(change) = ctx.conn.role_after_exec.take() {
        super::replication_cmd::change_role(ctx.shared, change);
    }
}

/// Runs one queued command through the same `call` as a command sent alone (tracking of its
/// reads, commandstats, the observe hook), against the keyspace EXEC holds.
fn run_queued<'s>(ctx: &mut Ctx<'_, 's>, queued: &OwnedArgs, locked: &mut store::Locked<'s>) {
    let args = queued.args();
    let command = lookup(args.get(0)).expect("queued commands were looked up when queued");
    let caller = Caller::Exec(locked);
    super::call(
        ctx.shared,
        ctx.conn,
        ctx.out,
        command,
        &mut Resp(args),
        caller,
    );
}
