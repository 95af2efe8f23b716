//! The replication commands: REPLICAOF / SLAVEOF, ROLE, WAIT, the primary's side of the
//! handshake (REPLCONF, PSYNC), and the internal stream commands a replica applies
//! (`REPL.PUT`, `REPL.TTL`, `REPL.CAS`, `REPL.DEL`, `REPL.FLUSH`: `crate::replication::encode`
//! writes them; only the replica link may run them, `Caller::Replication`).

use std::sync::atomic::Ordering::Relaxed;

use super::Ctx;

/// What a REPLICAOF asks for: become a primary, or follow `host:port`.
#[derive(Debug)]
pub enum RoleChange {
    Primary,
    ReplicaOf(String, u16),
}

/// Applies a REPLICAOF: at once, or after EXEC for one queued in MULTI (`Conn::role_after_exec`).
pub fn change_role(shared: &crate::shared::Shared, change: RoleChange) {
    let repl = &shared.replication;
    match change {
        RoleChange::Primary => {
            if repl.is_replica() {
                // Before the first change this node captures as a primary: its logs number
                // above what the old primary wrote to the databases.
                shared.writeback.rebase_all();
                repl.promote();
                tracing::info!("MASTER MODE enabled (user request)");
            }
        }
        RoleChange::ReplicaOf(host, port) => {
            tracing::info!("REPLICAOF {host}:{port} enabled (user request)");
            repl.replicaof(host, port);
        }
    }
}

fn change_role_now_or_after_exec(ctx: &mut Ctx<'_, '_>, change: RoleChange) {
    if ctx.conn.in_exec {
        ctx.conn.role_after_exec = Some(change);
    } else {
        change_role(ctx.shared, change);
    }
}

/// REPLICAOF host port | REPLICAOF NO ONE (SLAVEOF is the same command).
pub fn replicaof(ctx: &mut Ctx<'_, '_>) {
    let (host, port) = (ctx.arg(1), ctx.arg(2));
    let repl = &ctx.shared.replication;
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        change_role_now_or_after_exec(ctx, RoleChange::Primary);
        return ctx.ok();
    }
    let Some(port) = std::str::from_utf8(port)
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|&p| p > 0)
    else {
        return ctx.err(b"ERR Invalid master port");
    };
    let host = String::from_utf8_lossy(host).into_owned();
    if repl
        .master()
        .is_some_and(|(h, p)| h.eq_ignore_ascii_case(&host) && p == port)
    {
        return ctx.simple(b"OK Already connected to specified master");
    }
    change_role_now_or_after_exec(ctx, RoleChange::ReplicaOf(host, port));
    ctx.ok()
}

pub fn role(ctx: &mut Ctx<'_, '_>) {
    ctx.shared.replication.role(ctx.out);
}

/// WAIT numreplicas timeout: replies once `numreplicas` replicas acknowledged every write
/// made before it, or at the timeout (milliseconds, 0: none) with how many did.
pub fn wait(ctx: &mut Ctx<'_, '_>) {
    let (Some(want), Some(timeout)) = (ctx.int_arg(1), ctx.int_arg(2)) else {
        return;
    };
    if timeout < 0 {
        return ctx.err(b"ERR timeout is negative");
    }
    let repl = &ctx.shared.replication;
    if repl.is_replica() {
        return ctx.err(b"ERR WAIT cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.");
    }
    if want <= 0 || ctx.conn.in_exec {
        // Inside EXEC a blocking command does not block (as in Redis): it answers now.
        return ctx.int(repl.acknowledged(repl.offset()) as i64);
    }
    // Blocked until the reply is posted (CLIENT LIST `b`), as BLPOP is.
    ctx.conn.publish_last_command();
    ctx.conn
        .client
        .state
        .flags
        .fetch_or(crate::clients::client_flags::BLOCKED, Relaxed);
    ctx.conn.waiting = true;
    repl.wait(ctx.conn.client.clone(), want as usize, timeout as u64);
}

/// REPLCONF listening-port p | capa ... | ack offset | getack | ip-address a: the replica's
/// side of the handshake, and its acknowledgements (which get no reply, as in Redis).
pub fn replconf(ctx: &mut Ctx<'_, '_>) {
    if ctx.argc().is_multiple_of(2) {
        return ctx.err(b"ERR syntax error");
    }
    let mut i = 1;
    while i + 1 < ctx.argc() {
        let (name, value) = (ctx.arg(i).to_ascii_lowercase(), ctx.arg(i + 1));
        match name.as_slice() {
            b"listening-port" => {
                let Some(port) = std::str::from_utf8(value)
                    .ok()
                    .and_then(|p| p.parse::<u16>().ok())
                else {
                    return ctx.err(b"ERR value is not an integer or out of range");
                };
                ctx.shared
                    .replication
                    .set_listening_port(ctx.conn.client.id, port);
            }
            b"ip-address" => {
                let Ok(ip) = std::str::from_utf8(value) else {
                    return ctx.err(b"ERR invalid ip-address");
                };
                if ip.is_empty() || ip.len() > 255 {
                    return ctx.err(b"ERR invalid ip-address");
                }
                ctx.shared
                    .replication
                    .set_announced_ip(ctx.conn.client.id, ip.to_string());
            }
            b"ack" => {
                if let Some(offset) = crate::replication::encode::parse_u64(value) {
                    ctx.shared.replication.ack(ctx.conn.client.id, offset);
                }
                return;
            }
            b"getack" => return,
            b"capa" | b"rdb-only" | b"rdb-filter-only" => {}
            _ => {
                let msg = format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(ctx.arg(i))
                );
                return ctx.err(msg.as_bytes());
            }
        }
        i += 2;
    }
    ctx.ok()
}

/// PSYNC replid offset: this connection becomes a replica's (see `replication::primary`).
pub fn psync(ctx: &mut Ctx<'_, '_>) {
    let replid = ctx.arg(1).to_vec();
    let Some(offset) = ctx.int_arg(2) else {
        return;
    };
    let client = ctx.conn.client.clone();
    if let Err(e) = ctx.shared.replication.psync(client, &replid, offset) {
        ctx.err(e.message().as_bytes());
    }
}

/// REPL.PUT place: the record as the primary has it now, after its log and seq (varints).
pub fn repl_put(ctx: &mut Ctx<'_, '_>) {
    let author = ctx.db.author();
    let Some((_, _, record)) = crate::replication::encode::put_place(ctx.arg(1)) else {
        return ctx.err(b"ERR replication record: malformed place");
    };
    match ctx.shared.store.put_encoded(author, record) {
        Ok(cas) => {
            ctx.shared.replication.max_cas.fetch_max(cas, Relaxed);
            ctx.ok()
        }
        Err(e) => ctx.err(format!("ERR replication record: {e}").as_bytes()),
    }
}

/// REPL.TTL log seq key deadline cas: the record's deadline (absolute ms, -1: none) and CAS.
pub fn repl_ttl(ctx: &mut Ctx<'_, '_>) {
    let (Some(deadline), Some(cas)) = (ctx.int_arg(4), ctx.int_arg(5)) else {
        return;
    };
    let deadline = (deadline >= 0).then_some(deadline as u64);
    ctx.db.write(ctx.args.get(3), |e| {
        if e.set_expire_keep_cas(deadline) {
            e.set_cas(cas as u64);
        }
    });
    ctx.shared
        .replication
        .max_cas
        .fetch_max(cas as u64, Relaxed);
    ctx.ok()
}

/// REPL.CAS log seq key cas.
pub fn repl_cas(ctx: &mut Ctx<'_, '_>) {
    let Some(cas) = ctx.int_arg(4) else {
        return;
    };
    ctx.db.write(ctx.args.get(3), |e| e.set_cas(cas as u64));
    ctx.shared
        .replication
        .max_cas
        .fetch_max(cas as u64, Relaxed);
    ctx.ok()
}

/// REPL.DEL log seq key: deleted, expired or evicted on the primary.
pub fn repl_del(ctx: &mut Ctx<'_, '_>) {
    ctx.db.write(ctx.args.get(3), |e| e.remove());
    ctx.ok()
}

/// REPL.FLUSH seq...: FLUSHALL on the primary.
pub fn repl_flush(ctx: &mut Ctx<'_, '_>) {
    ctx.db.flush();
    ctx.ok()
}
