//! The command path: the one function, `call`, that every command runs through, whatever
//! protocol framed it (RESP, memcached) and whoever runs it (a client, EXEC, later a Lua script
//! or a replication stream). The checks, the key locking, the tracking of reads and the
//! statistics live here once; only the request's body and the form of its replies differ by
//! protocol (`Body`).

use std::sync::atomic::Ordering::Relaxed;

use resp::reply;
use store::{Db, Locked};

use super::{flags, lookup, stats, unknown_command_error, Args, Command, Conn, Ctx, OwnedArgs};
use crate::clients::client_flags::BLOCKED;
use crate::shared::Shared;

/// A request as the command path runs it: the part that differs by protocol.
///
/// A RESP request is [`Resp`] (its arguments, run by the table entry's handler); a memcached
/// request is the memcached front end's body, whose handler writes memcached replies.
pub trait Body {
    /// The request's arguments in RESP form (name first) when it has them: arity, MULTI
    /// queueing, key locking and the tracking of reads go by them. None for a memcached request:
    /// it is never queued, tracks nothing, and its multi-key `get` is not atomic (as in
    /// memcached).
    fn args(&self) -> Option<Args<'_>>;

    /// Calls `f` with each argument of the request as the command it maps onto (name first),
    /// for the slow log and MONITOR. Only called when one of them needs it.
    fn for_each_arg(&self, f: &mut dyn FnMut(&[u8]));

    /// Calls `f` with each key the request names (write-behind's admission check).
    fn for_each_key(&self, command: &'static Command, f: &mut dyn FnMut(&[u8]));

    /// Runs the handler against `db` (whose writes carry the caller's author), appending the
    /// reply to `out`.
    fn run<'s>(
        &mut self,
        command: &'static Command,
        db: Db<'_, 's>,
        shared: &'s Shared,
        conn: &mut Conn,
        out: &mut Vec<u8>,
    );

    /// The error message `reply` carries (errorstats counts it by its first word), None when
    /// the reply is not an error.
    fn error_in(reply: &[u8]) -> Option<&[u8]>;

    /// Writes the refusal `msg` (Redis's text, e.g. `NOAUTH Authentication required.`) in the
    /// request's protocol.
    fn refuse(out: &mut Vec<u8>, msg: &[u8]);
}

/// A RESP request: its arguments, run by the table entry's handler.
#[derive(Clone, Copy)]
pub struct Resp<'a>(pub Args<'a>);

impl Body for Resp<'_> {
    #[inline]
    fn args(&self) -> Option<Args<'_>> {
        Some(self.0)
    }

    fn for_each_arg(&self, f: &mut dyn FnMut(&[u8])) {
        (0..self.0.len()).for_each(|i| f(self.0.get(i)));
    }

    fn for_each_key(&self, command: &'static Command, f: &mut dyn FnMut(&[u8])) {
        command
            .key_positions(self.0.len())
            .for_each(|i| f(self.0.get(i)));
    }

    #[inline]
    fn run<'s>(
        &mut self,
        command: &'static Command,
        db: Db<'_, 's>,
        shared: &'s Shared,
        conn: &mut Conn,
        out: &mut Vec<u8>,
    ) {
        let mut ctx = Ctx {
            args: self.0,
            db,
            out,
            shared,
            conn,
        };
        (command.handler)(&mut ctx);
    }

    #[inline]
    fn error_in(reply: &[u8]) -> Option<&[u8]> {
        let body = reply.strip_prefix(b"-")?;
        let end = body.iter().position(|&b| b == b'\r').unwrap_or(body.len());
        Some(&body[..end])
    }

    fn refuse(out: &mut Vec<u8>, msg: &[u8]) {
        reply::error(out, msg)
    }
}

/// Who runs a command: which checks apply and which keyspace view it runs against.
pub enum Caller<'l, 's> {
    /// A client's own request: checked in full (arity, auth, subscribed mode, MULTI), queued
    /// when the client is in MULTI, its keys locked together when it has several.
    Client,
    /// A command EXEC runs from its queue, against the keyspace EXEC holds locked. It was
    /// checked when it was queued; it is not queued again and does not become the client's
    /// last command (CLIENT LIST shows `exec`, as Redis does).
    Exec(&'l mut Locked<'s>),
    /// A command a Lua script runs (`redis.call`), checked by the script's library (arity,
    /// `noscript`, writes in a read-only script). It runs against EXEC's locked keyspace when
    /// the script runs inside a transaction, else on the shared keyspace, which the script
    /// has to itself (it holds every gate, `crate::scripts`). MONITOR shows it as `lua`'s.
    Script(Option<&'l mut Locked<'s>>),
    /// A command of the replication stream, applied by the replica link
    /// (`crate::replica_link`): no client checks (a replica's writes come this way only), on
    /// the shared keyspace, with the link as the author (so client tracking on the replica
    /// invalidates near caches as the primary's changes arrive).
    Replication,
}

/// Runs one RESP request of a client: looks its command up, then `call`s it. An unknown
/// command has no entry to count under; its error still goes to errorstats.
pub fn dispatch(shared: &Shared, conn: &mut Conn, args: Args<'_>, out: &mut Vec<u8>) {
    match lookup(args.get(0)) {
        Some(command) => call(shared, conn, out, command, &mut Resp(args), Caller::Client),
        None => refuse::<Resp>(conn, out, &unknown_command_error(&args)),
    }
}

/// The command path. In order:
/// 1. for a client's request: arity (RESP), auth (NOAUTH), MONITOR mode (no keyspace
///    commands), RESP2 subscribed mode, the
///    client's last command (CLIENT LIST `cmd=`), MULTI (queue it, or refuse a DEFERRED
///    command); a refused command counts as `rejected_calls` and dooms an open transaction;
/// 2. key locking: a client's command with several keys locks their shards together (atomic
///    like in Redis: MSET, DEL k1 k2, MGET); EXEC's commands run on the keyspace it holds;
/// 3. the tracking of reads (CLIENT TRACKING), then the handler, whose writes carry the
///    client as their author (`store::Author`, through `Db`);
/// 4. statistics: commandstats `calls`/`usec`/`failed_calls` (an OOM refusal is
///    `rejected_calls`), errorstats;
/// 5. `observe`: the MONITOR feed, the slow log and the latency monitor (`crate::observe`).
///
/// Every path uses it: `dispatch` for RESP, the memcached front end with its own `Body` (each
/// verb maps onto its table entry, `memcached::verbs`), EXEC with `Caller::Exec`. A Lua script
/// would call it with a caller of its own (the script's locked keyspace, its checks: no
/// DEFERRED, no NOSCRIPT commands) and a body that collects the reply for the script; a
/// replication stream with a caller that skips the client checks and names the primary as
/// the author.
#[inline(always)]
pub fn call<'s, B: Body>(
    shared: &'s Shared,
    conn: &mut Conn,
    out: &mut Vec<u8>,
    command: &'static Command,
    body: &mut B,
    caller: Caller<'_, 's>,
) {
    match caller {
        Caller::Exec(locked) => {
            return run(shared, conn, out, command, body, Db::Locked(locked), false)
        }
        Caller::Script(Some(locked)) => {
            return run(shared, conn, out, command, body, Db::Locked(locked), true)
        }
        Caller::Script(None) => {
            let db = Db::Shared(&shared.store, conn.author());
            return run(shared, conn, out, command, body, db, true);
        }
        Caller::Replication => {
            let db = Db::Shared(&shared.store, conn.author());
            return run(shared, conn, out, command, body, db, false);
        }
        Caller::Client => {}
    }
    if let Some(msg) = check(shared, conn, command, body) {
        stats::record_rejected(command);
        return refuse::<B>(conn, out, msg.as_bytes());
    }
    conn.last_command = command.name;
    if let Some(queue) = conn.multi.as_mut() {
        if command.has(flags::DEFERRED) {
            let msg = format!("ERR '{}' cannot run inside MULTI", command.name);
            stats::record_rejected(command);
            return refuse::<B>(conn, out, msg.as_bytes());
        }
        if let (false, Some(args)) = (command.has(flags::NOQUEUE), body.args()) {
            let queued = OwnedArgs::copy(&args);
            let mem = &conn.client.state.multi_mem;
            mem.fetch_add(queued.buf.len() as u64, Relaxed);
            queue.push(queued);
            return reply::simple(out, b"QUEUED");
        }
    }
    // Read-through: a read of missing keys of `read_through` mappings waits for their loads.
    if conn.loaded.is_some() || shared.writeback.reads_through() {
        match super::read_through::before(shared, conn, command, body) {
            super::read_through::Before::Run => {}
            super::read_through::Before::Deferred => return,
            super::read_through::Before::Refused(msg) => {
                stats::record_rejected(command);
                return refuse::<B>(conn, out, msg.as_bytes());
            }
        }
    }
    let deferred = command.has(flags::DEFERRED);
    if deferred {
        // Marked blocked (CLIENT LIST `b`, INFO blocked_clients) before the work is handed
        // out, so the reply's arrival (`ClientInfo::post`) always clears it after; and the
        // command published first, so a client listed as blocked shows what it waits on.
        conn.publish_last_command();
        conn.client.state.flags.fetch_or(BLOCKED, Relaxed);
    }
    let store = &*shared.store;
    let author = conn.author();
    let reply_at = out.len();
    // A script holds every gate while it runs: a command waits for it, but not past
    // busy-reply-threshold (then -BUSY). Scripts (which take the gates themselves) and
    // commands allowed during a busy script pass by.
    let _pass = if command.has(flags::SCRIPTING | flags::ALLOW_BUSY) {
        None
    } else {
        let ms = shared.settings.busy_reply_threshold.load(Relaxed);
        match shared.scripts.enter(std::time::Duration::from_millis(ms)) {
            Some(pass) => Some(pass),
            None => {
                if deferred {
                    conn.client.state.flags.fetch_and(!BLOCKED, Relaxed);
                }
                stats::record_rejected(command);
                return refuse::<B>(conn, out, crate::scripts::BUSY);
            }
        }
    };
    match body
        .args()
        .filter(|_| !command.has(flags::NOQUEUE | flags::SCRIPTING))
    {
        // Several keys are locked together, found by the key specs (a key count) or by the
        // table's fixed positions.
        Some(args) if command.has(flags::MOVABLE) => {
            let keys = movable_keys(command, args);
            let locked = store.lock_keys(author, keys.iter().map(|&i| args.get(i)));
            run_locked(shared, conn, out, command, body, locked);
        }
        Some(args) if command.key_positions(args.len()).nth(1).is_some() => {
            let keys = command.key_positions(args.len()).map(|i| args.get(i));
            let locked = store.lock_keys(author, keys);
            run_locked(shared, conn, out, command, body, locked);
        }
        _ => run(
            shared,
            conn,
            out,
            command,
            body,
            Db::Shared(store, author),
            false,
        ),
    }
    // Write-behind: the command's changes of mapped keys go to their logs before its reply
    // (EXEC's commands are committed once, by EXEC itself).
    if shared.writeback.active() {
        super::wb::after_write(shared, conn, out, reply_at, B::refuse);
    }
    if deferred && !conn.waiting {
        conn.client.state.flags.fetch_and(!BLOCKED, Relaxed);
    }
    // Clients blocked on lists this command pushed to are served now that its keys are
    // unlocked (an EXEC's too: its queued commands run under the `Caller::Exec` path above).
    if shared.blocking.pending() {
        shared.blocking.serve(store);
    }
    // CLIENT CACHING applies to the next command, or to the whole transaction that command
    // opens: Redis keeps the flag while the client is in MULTI and clears it after EXEC.
    if let Some(state) = conn.tracking.as_mut() {
        if conn.multi.is_none() && command.name != "client" {
            state.caching = None;
        }
    }
}

/// Why a client's command may not run here and now (Redis's message), if it may not.
fn check<B: Body>(
    shared: &Shared,
    conn: &Conn,
    command: &'static Command,
    body: &B,
) -> Option<String> {
    if command.has(flags::INTERNAL) {
        let name = command.name;
        return Some(format!(
            "ERR unknown command '{name}', with args beginning with: "
        ));
    }
    if let Some(args) = body.args() {
        if !command.arity_ok(args.len()) {
            let name = command.name;
            return Some(format!(
                "ERR wrong number of arguments for '{name}' command"
            ));
        }
    }
    if !command.has(flags::NOAUTH) && conn.auth_pending(&shared.settings) {
        return Some("NOAUTH Authentication required.".into());
    }
    // A monitoring connection may not touch the keyspace (as a Redis replica may not).
    if conn.monitor && super::observe_hook::refuses(command) {
        return Some(String::from_utf8_lossy(super::observe_hook::REFUSED).into_owned());
    }
    if shared.persistence.loading() && !allowed_while_loading(command, body) {
        return Some(if body.args().is_some() {
            "LOADING Redis is loading the dataset in memory".into()
        } else {
            "LOADING cairn is loading the dataset in memory".into()
        });
    }
    if (command.has(flags::WRITE) || command.name == "ping") && shared.writes_refused() {
        return Some(MISCONF.into());
    }
    if let Some(msg) = replication_refusal(shared, command, body) {
        return Some(msg.into());
    }
    if conn.multi.is_some() && command.has(flags::NOMULTI) && !command.has(flags::NOQUEUE) {
        return Some("ERR Command not allowed inside a transaction".into());
    }
    if conn.subscribed_resp2() && !command.has(flags::PUBSUB) {
        return Some(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            command.name
        ));
    }
    None
}

/// Why replication refuses a client's command here: a write on a read-only replica
/// (`-READONLY`), a command needing fresh data while the replica's link is down and
/// `replica-serve-stale-data` is no (`-MASTERDOWN`, except Redis's `stale` commands), a write
/// on a primary with fewer good replicas than `min-replicas-to-write` (`-NOREPLICAS`).
fn replication_refusal<B: Body>(
    shared: &Shared,
    command: &'static Command,
    body: &B,
) -> Option<&'static str> {
    let repl = &shared.replication;
    if repl.is_replica() {
        let config = repl.config.read();
        if command.has(flags::WRITE) && config.replica_read_only {
            return Some("READONLY You can't write against a read only replica.");
        }
        if !config.replica_serve_stale_data
            && !repl.link_up.load(Relaxed)
            && !has_spec_flag(command, body, "stale")
        {
            return Some(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            );
        }
        return None;
    }
    let min = shared.settings.min_replicas_to_write.load(Relaxed);
    if min > 0 && command.has(flags::WRITE) && (repl.good_replicas() as u64) < min {
        return Some("NOREPLICAS Not enough good replicas to write.");
    }
    None
}

/// Whether the command (or its subcommand) has Redis's flag `flag` in its metadata.
fn has_spec_flag<B: Body>(command: &Command, body: &B, flag: &str) -> bool {
    let Some(spec) = super::spec::spec(command.name) else {
        return false;
    };
    let flags = match (spec.subcommands.is_empty(), body.args()) {
        (false, Some(args)) if args.len() > 1 => {
            spec.subcommand(args.get(1)).map_or(spec.flags, |s| s.flags)
        }
        _ => spec.flags,
    };
    flags.contains(&flag)
}

/// Redis's refusal of writes after a failed background save (`stop-writes-on-bgsave-error`).
const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// Whether a command may run while the dataset loads: Redis's `loading` flag of the command
/// (or of its subcommand), from the command metadata. memcached requests may not.
fn allowed_while_loading<B: Body>(command: &Command, body: &B) -> bool {
    let Some(args) = body.args() else {
        return false;
    };
    let Some(spec) = super::spec::spec(command.name) else {
        return false;
    };
    let flags = match (spec.subcommands.is_empty(), args.len() > 1) {
        (false, true) => spec.subcommand(args.get(1)).map_or(spec.flags, |s| s.flags),
        _ => spec.flags,
    };
    flags.contains(&"loading")
}

/// Replies with an error for a command that could not run; inside MULTI this also dooms
/// the transaction, as in Redis.
fn refuse<B: Body>(conn: &mut Conn, out: &mut Vec<u8>, msg: &[u8]) {
    stats::record_error(msg);
    if conn.multi.is_some() {
        conn.multi_dirty = true;
    }
    B::refuse(out, msg)
}

/// Steps 3 to 5 of `call`, shared by every caller once the keyspace view is chosen.
#[inline(always)]
/// `run` on the keys `locked` holds, for a client's command.
fn run_locked<'s, B: Body>(
    shared: &'s Shared,
    conn: &mut Conn,
    out: &mut Vec<u8>,
    command: &'static Command,
    body: &mut B,
    mut locked: Locked<'s>,
) {
    run(
        shared,
        conn,
        out,
        command,
        body,
        Db::Locked(&mut locked),
        false,
    );
}

fn run<'s, B: Body>(
    shared: &'s Shared,
    conn: &mut Conn,
    out: &mut Vec<u8>,
    command: &'static Command,
    body: &mut B,
    mut db: Db<'_, 's>,
    by_script: bool,
) {
    let started = super::timing::Stamp::now();
    // Remembered before the read runs: a write racing the read then still invalidates (at worst
    // spuriously), where remembering after could miss it and leave the client stale.
    if conn.tracking.is_some() {
        if let Some(args) = body.args() {
            remember_reads(command, args, shared, conn);
        }
    }
    if shared.writeback.active() && command.has(flags::WRITE) {
        if let Some(msg) = super::wb::admit(shared, command, body, &mut db) {
            stats::record_rejected(command);
            return refuse::<B>(conn, out, msg);
        }
    }
    let before = out.len();
    body.run(command, db, shared, conn, out);
    let nanos = started.elapsed_nanos();
    let protocol = conn.client.protocol as usize;
    count(command, protocol, nanos, B::error_in(&out[before..]));
    let client = if by_script {
        &shared.scripts.lua_client
    } else {
        &conn.client
    };
    observe(shared, client, command, body, nanos);
}

/// Counts a command that ran (INFO commandstats / errorstats) from the error its reply
/// carries, if any. An OOM refusal counts as rejected, as Redis refuses such commands before
/// running them.
fn count(command: &'static Command, protocol: usize, nanos: u64, error: Option<&[u8]>) {
    match error {
        None => stats::record(command, protocol, nanos, false),
        Some(msg) => {
            stats::record_error(msg);
            if msg.split(|&b| b == b' ').next() == Some(b"OOM") {
                stats::record_rejected(command);
            } else {
                stats::record(command, protocol, nanos, true);
            }
        }
    }
}

/// The operator's views (`crate::observe`): MONITOR, the slow log and the latency monitor see
/// every command here, after it ran, whatever its protocol or caller; `body.for_each_arg`
/// gives its arguments as the command it maps onto (called only when a view wants them).
#[inline]
fn observe<B: Body>(
    shared: &Shared,
    client: &crate::clients::ClientInfo,
    command: &'static Command,
    body: &B,
    nanos: u64,
) {
    let took = std::time::Duration::from_nanos(nanos);
    super::observe_hook::after_call(shared, command, client, took, &|f| body.for_each_arg(f));
}

/// Client tracking: a tracked client's reads are remembered so that a change of the key sends
/// it an invalidation.
fn remember_reads(command: &Command, args: Args<'_>, shared: &Shared, conn: &Conn) {
    let Some(state) = conn.tracking.as_ref() else {
        return;
    };
    if command.has(flags::READONLY) && state.tracks_reads() {
        if command.has(flags::MOVABLE) {
            for i in movable_keys(command, args) {
                shared.tracking.remember(args.get(i), &state.tracker);
            }
            return;
        }
        for i in command.key_positions(args.len()) {
            shared.tracking.remember(args.get(i), &state.tracker);
        }
    }
}

/// The key positions of a command whose keys move with its arguments (`flags::MOVABLE`), as
/// its key specs find them. When they cannot be found (a bad key count, which the handler
/// refuses before touching a key) every argument counts, so that whatever the handler might
/// read is locked.
pub(super) fn movable_keys(command: &Command, args: Args<'_>) -> Vec<usize> {
    let argv: Vec<&[u8]> = (0..args.len()).map(|i| args.get(i)).collect();
    super::spec::spec(command.name)
        .and_then(|spec| super::spec::find_keys(spec, &argv))
        .map(|keys| keys.iter().map(|k| k.pos).collect())
        .unwrap_or_else(|| (1..args.len()).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clients::ClientInfo;
    use crate::config::Config;
    use crate::protocol::Protocol;

    fn server(flags: &[&str]) -> Arc<Shared> {
        let args = ["cairn-server"].iter().chain(flags).copied();
        Shared::new(Config::from_args(args).expect("config"))
    }

    fn client(shared: &Shared) -> Conn {
        let info = Arc::new(ClientInfo::detached(1, Protocol::Resp));
        Conn::new(info, !shared.settings.auth_required())
    }

    /// Runs one RESP request as a client's and returns the reply.
    fn send(shared: &Shared, conn: &mut Conn, parts: &[&str]) -> String {
        let (mut buf, mut ranges) = (Vec::new(), Vec::new());
        for part in parts {
            let start = buf.len();
            buf.extend_from_slice(part.as_bytes());
            ranges.push(start..buf.len());
        }
        let mut out = Vec::new();
        dispatch(shared, conn, Args::new(&buf, &ranges), &mut out);
        String::from_utf8(out).expect("utf-8 reply")
    }

    #[test]
    fn a_refusal_in_multi_queues_nothing_and_dooms_exec() {
        let shared = server(&[]);
        let mut c = client(&shared);
        assert_eq!(send(&shared, &mut c, &["MULTI"]), "+OK\r\n");
        assert_eq!(send(&shared, &mut c, &["SET", "k", "v"]), "+QUEUED\r\n");
        let refused = send(&shared, &mut c, &["GET"]);
        assert!(
            refused.starts_with("-ERR wrong number of arguments"),
            "{refused}"
        );
        assert_eq!(c.multi.as_ref().map(Vec::len), Some(1));
        let unknown = send(&shared, &mut c, &["NOPE"]);
        assert!(
            unknown.starts_with("-ERR unknown command 'NOPE'"),
            "{unknown}"
        );
        assert!(send(&shared, &mut c, &["EXEC"]).starts_with("-EXECABORT"));
        assert!(c.multi.is_none());
        assert_eq!(send(&shared, &mut c, &["GET", "k"]), "$-1\r\n");
    }

    #[test]
    fn checks_run_in_order_before_anything_else() {
        let shared = server(&["--requirepass", "pw"]);
        let mut c = client(&shared);
        // arity first, then auth
        assert!(send(&shared, &mut c, &["GET"]).starts_with("-ERR wrong number"));
        assert!(send(&shared, &mut c, &["GET", "k"]).starts_with("-NOAUTH"));
        assert_eq!(
            c.last_command, "",
            "a refused command is not the last command"
        );
        assert_eq!(send(&shared, &mut c, &["AUTH", "pw"]), "+OK\r\n");
        assert_eq!(
            send(&shared, &mut c, &["SUBSCRIBE", "ch"])
                .matches("subscribe")
                .count(),
            1
        );
        let refused = send(&shared, &mut c, &["GET", "k"]);
        assert!(refused.starts_with("-ERR Can't execute 'get'"), "{refused}");
        assert!(send(&shared, &mut c, &["PING"]).starts_with("*2\r\n$4\r\npong"));
        assert_eq!(c.last_command, "ping");
    }

    #[test]
    fn the_last_command_is_published_once_per_batch() {
        let shared = server(&[]);
        let mut c = client(&shared);
        send(&shared, &mut c, &["SET", "k", "v"]);
        send(&shared, &mut c, &["GET", "k"]);
        assert_eq!(c.client.last_command(), "", "not published per command");
        c.publish_state();
        assert_eq!(c.client.last_command(), "get");
        send(&shared, &mut c, &["MULTI"]);
        send(&shared, &mut c, &["INCR", "n"]);
        send(&shared, &mut c, &["EXEC"]);
        c.publish_state();
        assert_eq!(c.client.last_command(), "exec");
    }

    #[test]
    fn error_replies_are_read_in_each_protocol() {
        assert_eq!(
            Resp::error_in(b"-OOM command not allowed\r\n"),
            Some(&b"OOM command not allowed"[..])
        );
        assert_eq!(Resp::error_in(b"+OK\r\n"), None);
        assert_eq!(Resp::error_in(b"$4\r\n-ERR\r\n"), None);
        let mut out = Vec::new();
        Resp::refuse(&mut out, b"NOAUTH Authentication required.");
        assert_eq!(out, b"-NOAUTH Authentication required.\r\n");
    }
}
