//! The meta commands: `mg`, `ms`, `md`, `ma`, `me` (`mn` is answered inline).
//!
//! Return flags are written in request order, as memcached does, followed by `Z` (a client
//! already won the right to recache), `X` (stale) and `W` (this client won).

use memcache::{response, MetaCode, MetaDebugReply, MetaFlags, MetaReply, StoreKind};
use store::{now_ms, Kind};

use super::text::{apply_delta, Delta, OOM_STORING};
use super::{is_string, retime, ttl_secs, Counters, Exec, Expiry};
use crate::keyspace::{self as ops, Cond, StoreArgs, StoreOutcome, Ttl};

/// What `mg` reads off a record before answering.
#[derive(Clone, Copy)]
struct View<'a> {
    value: &'a [u8],
    flags: u32,
    cas: u64,
    deadline: Option<u64>,
    was_hit: bool,
    stale: bool,
    win_sent: bool,
}

/// What an `mg` hit decided, to be applied to the record once the reply is written.
struct MgEffects {
    won: bool,
    /// `T` was given: the new deadline (None: never), or `Expired`.
    new_ttl: Option<Expiry>,
}

impl<'a> View<'a> {
    fn of(item: store::Item<'a>) -> View<'a> {
        View {
            value: item.value(),
            flags: item.flags(),
            cas: item.cas(),
            deadline: item.expire_at(),
            was_hit: item.was_hit(),
            stale: item.is_stale(),
            win_sent: item.win_sent(),
        }
    }
}

/// Appends ` O<opaque>` and ` k<key>` in request order: the flags every meta reply echoes.
fn echo<'o>(mut r: MetaReply<'o>, flags: MetaFlags<'_>, key: &[u8], binary: bool) -> MetaReply<'o> {
    for f in flags.iter() {
        match f.flag {
            b'O' => r = r.flag_bytes(b'O', f.token),
            b'k' => r = r.key(key, binary),
            _ => {}
        }
    }
    r
}

/// A reply that carries only the status and the echoed flags.
/// memcached `-C` refuses a client-chosen CAS (`E`), with its own wording per command: under
/// `--cas no` records have no CAS to set.
fn refuses_client_cas(store: &store::Store, flags: MetaFlags<'_>) -> bool {
    flags.has(b'E') && !store.keeps_cas()
}

fn status(out: &mut Vec<u8>, code: MetaCode, flags: MetaFlags<'_>, key: &[u8], binary: bool) {
    echo(MetaReply::new(out, code), flags, key, binary).finish();
}

/// Writes an `mg` hit (`VA`/`HD` with its flags), walking the flags in request order.
fn mg_hit(
    out: &mut Vec<u8>,
    view: View<'_>,
    flags: MetaFlags<'_>,
    key: &[u8],
    binary: bool,
    created: bool,
    now: u64,
) -> MgEffects {
    let with_value = flags.has(b'v');
    let mut r = if with_value {
        MetaReply::value(out, view.value.len())
    } else {
        MetaReply::new(out, MetaCode::Hd)
    };
    // A created record starts without a deadline; `N` gives it one where it appears.
    let mut deadline = if created { None } else { view.deadline };
    let mut won = false;
    let mut new_ttl = None;
    for f in flags.iter() {
        match f.flag {
            b'T' => {
                let expiry = Expiry::from_exptime(flags.i64(b'T').unwrap_or(0), now);
                deadline = expiry.deadline();
                new_ttl = Some(expiry);
            }
            b'N' if created => {
                deadline = view.deadline;
                won = true;
            }
            b'R' => {
                let limit = Expiry::from_exptime(flags.i64(b'R').unwrap_or(0), now);
                if let (Expiry::At(limit), Some(d)) = (limit, deadline) {
                    if !view.win_sent && !created && d < limit {
                        won = true;
                    }
                }
            }
            b's' => r = r.flag_num(b's', view.value.len() as u64),
            b't' => r = r.flag_int(b't', ttl_secs(deadline, now)),
            b'c' => r = r.flag_num(b'c', view.cas),
            b'f' => r = r.flag_num(b'f', u64::from(view.flags)),
            // Last-access times are not tracked (documented in the README): a timestamp per
            // record, written on every hit, would cost memory and cache-line traffic.
            b'l' => r = r.flag_num(b'l', 0),
            b'h' => r = r.flag_num(b'h', u64::from(view.was_hit)),
            b'O' => r = r.flag_bytes(b'O', f.token),
            b'k' => r = r.key(key, binary),
            _ => {}
        }
    }
    if view.win_sent {
        r = r.flag(b'Z');
    }
    if view.stale {
        r = r.flag(b'X');
        if !view.win_sent {
            won = true;
        }
    }
    if won {
        r = r.flag(b'W');
    }
    if with_value {
        r.finish_with_data(view.value);
    } else {
        r.finish();
    }
    MgEffects { won, new_ttl }
}

/// Outcome of `ms`, before the reply.
enum MsResult {
    /// Stored: the new CAS and value length.
    Stored(u64, usize),
    NotStored,
    Exists,
    NotFound,
    OutOfMemory,
}

impl Exec<'_> {
    /// The key to look up: as sent, or base64-decoded into the reusable buffer.
    fn meta_key<'k>(
        key_buf: &'k mut Vec<u8>,
        key: &'k [u8],
        flags: MetaFlags<'_>,
    ) -> Option<&'k [u8]> {
        if !flags.base64_key() {
            return Some(key);
        }
        memcache::decode_base64_key(key, key_buf).then_some(&key_buf[..])
    }

    pub(super) fn mg(&mut self, raw_key: &[u8], flags: MetaFlags<'_>, out: &mut Vec<u8>) {
        self.c.cmd_meta += 1;
        let Some(key) = Self::meta_key(self.key_buf, raw_key, flags) else {
            return response::client_error(out, "error decoding key");
        };
        if refuses_client_cas(&self.shared.store, flags) {
            return response::client_error(out, "invalid flag");
        }
        let binary = flags.base64_key();
        let ttl_set = flags.has(b'T');
        let quiet = flags.quiet();
        let store = &self.shared.store;
        let now = now_ms();

        // Fast path under the shard's shared lock, unless the request may change the record or
        // needs its state from before this access (`h`, `u`).
        let needs_write = [b'N', b'R', b'T', b'h', b'u'].iter().any(|&f| flags.has(f));
        if !needs_write {
            let found = store.read(key, |item| match item {
                Some(item) if is_string(item.kind()) => {
                    let view = View::of(item);
                    if view.stale && !view.win_sent {
                        // This client wins the recache: that is a write.
                        return None;
                    }
                    mg_hit(out, view, flags, key, binary, false, now);
                    Some(true)
                }
                _ => Some(false),
            });
            if let Some(hit) = found {
                count_mg(self.c, hit, false);
                if !hit && !quiet {
                    status(out, MetaCode::En, flags, key, binary);
                }
                return;
            }
        }

        let hit = store.write(self.author, key, |e| {
            let mut created = false;
            match e.item() {
                Some(item) if !is_string(item.kind()) => return false,
                Some(_) => {}
                None => {
                    let Some(ttl) = flags.i64(b'N') else {
                        return false;
                    };
                    let deadline = Expiry::from_exptime(ttl, now).deadline();
                    if e.put(Kind::String, b"", deadline, 0).is_err() {
                        return false;
                    }
                    if let Some(cas) = flags.u64(b'E') {
                        e.set_cas(cas);
                    }
                    created = true;
                }
            }
            let Some(item) = e.item() else {
                return false;
            };
            let view = View::of(item);
            let was_stale = view.stale;
            let effects = mg_hit(out, view, flags, key, binary, created, now);
            match effects.new_ttl {
                Some(Expiry::Expired) => {
                    e.remove();
                    return true;
                }
                Some(expiry) => retime(e, expiry.deadline()),
                None => {}
            }
            if effects.won {
                e.set_marks(was_stale, true);
            }
            true
        });
        // `h` needs the state from before this access, so the access is marked afterwards.
        if hit && flags.has(b'h') && !flags.has(b'u') {
            store.read(key, |_| ());
        }
        count_mg(self.c, hit, ttl_set);
        if !hit && !quiet {
            status(out, MetaCode::En, flags, key, binary);
        }
    }

    pub(super) fn ms(
        &mut self,
        raw_key: &[u8],
        data: &[u8],
        flags: MetaFlags<'_>,
        out: &mut Vec<u8>,
    ) {
        self.c.cmd_meta += 1;
        self.c.cmd_set += 1;
        let Some(key) = Self::meta_key(self.key_buf, raw_key, flags) else {
            return response::client_error(out, "error decoding key");
        };
        if refuses_client_cas(&self.shared.store, flags) {
            return response::client_error(out, "invalid flag");
        }
        let binary = flags.base64_key();
        let now = now_ms();
        let mode = flags.set_mode();
        let cas_in = flags.u64(b'C');
        // As memcached: a CAS turns set and replace into a CAS store; add ignores it.
        let cas_mode = cas_in.is_some() && matches!(mode, StoreKind::Set | StoreKind::Replace);
        let client_flags = flags.u32(b'F').unwrap_or(0);
        let expiry = Expiry::from_exptime(flags.i64(b'T').unwrap_or(0), now);
        let new_cas = flags.u64(b'E');
        let invalidate = flags.has(b'I');
        let max_value = self
            .shared
            .settings
            .max_value_size
            .load(std::sync::atomic::Ordering::Relaxed);

        let result = self.shared.store.write(self.author, key, |e| {
            let mut expiry = expiry;
            let mut stale_marks = None;
            let outcome = if cas_mode {
                let cas_in = cas_in.unwrap_or(0);
                match e.item() {
                    None => StoreOutcome::NotFound,
                    Some(item) if item.cas() == cas_in && cas_in != 0 => {
                        ops::store(e, &store_args(data, Cond::Always, expiry, client_flags))
                    }
                    // `I`: an older CAS still stores, but the value is marked stale and keeps
                    // the record's TTL.
                    Some(item) if invalidate && cas_in != 0 && cas_in < item.cas() => {
                        stale_marks = Some(item.win_sent());
                        expiry = Expiry::Never;
                        let args = StoreArgs {
                            value: data,
                            cond: Cond::Always,
                            ttl: Ttl::Keep,
                            flags: client_flags,
                            cas: None,
                        };
                        ops::store(e, &args)
                    }
                    Some(_) => StoreOutcome::Exists,
                }
            } else {
                match mode {
                    StoreKind::Append | StoreKind::Prepend => {
                        match e.item() {
                            None => match flags.i64(b'N') {
                                // `N`: a missing record is created from the appended data.
                                Some(ttl) => {
                                    expiry = Expiry::from_exptime(ttl, now);
                                    ops::store(
                                        e,
                                        &store_args(data, Cond::Always, expiry, client_flags),
                                    )
                                }
                                None => StoreOutcome::NotStored,
                            },
                            Some(item) if !is_string(item.kind()) => StoreOutcome::NotStored,
                            Some(item) if cas_in.is_some_and(|c| c != 0 && c != item.cas()) => {
                                StoreOutcome::Exists
                            }
                            Some(item)
                                if item.value().len().saturating_add(data.len()) > max_value =>
                            {
                                StoreOutcome::NotStored
                            }
                            Some(_) => {
                                expiry = Expiry::Never;
                                match ops::concat(e, data, mode == StoreKind::Prepend) {
                                    Ok(Some(_)) => {
                                        StoreOutcome::Stored(e.item().map_or(0, |i| i.cas()))
                                    }
                                    Ok(None) => StoreOutcome::NotStored,
                                    Err(_) => StoreOutcome::OutOfMemory,
                                }
                            }
                        }
                    }
                    _ => {
                        let cond = match mode {
                            StoreKind::Add => Cond::IfAbsent,
                            StoreKind::Replace => Cond::IfPresent,
                            _ => Cond::Always,
                        };
                        ops::store(e, &store_args(data, cond, expiry, client_flags))
                    }
                }
            };
            match outcome {
                StoreOutcome::Stored(mut cas) => {
                    if expiry == Expiry::Expired {
                        e.remove();
                    } else {
                        if let Some(win_sent) = stale_marks {
                            e.set_marks(true, win_sent);
                        }
                        if let Some(c) = new_cas {
                            e.set_cas(c);
                            cas = c;
                        }
                    }
                    let len = e.item().map_or(data.len(), |i| i.value().len());
                    MsResult::Stored(cas, len)
                }
                StoreOutcome::NotStored => MsResult::NotStored,
                StoreOutcome::Exists => MsResult::Exists,
                StoreOutcome::NotFound => MsResult::NotFound,
                StoreOutcome::OutOfMemory => {
                    // As memcached: do not leave the old value readable.
                    e.remove();
                    MsResult::OutOfMemory
                }
            }
        });

        if cas_mode {
            match result {
                MsResult::Stored(..) => self.c.cas_hits += 1,
                MsResult::Exists => self.c.cas_badval += 1,
                MsResult::NotFound => self.c.cas_misses += 1,
                _ => {}
            }
        }
        let (code, cas, len) = match result {
            MsResult::Stored(cas, len) => {
                if flags.quiet() {
                    return;
                }
                (MetaCode::Hd, cas, len)
            }
            MsResult::NotStored => (MetaCode::Ns, 0, data.len()),
            MsResult::Exists => (MetaCode::Ex, 0, data.len()),
            MsResult::NotFound => (MetaCode::Nf, 0, data.len()),
            MsResult::OutOfMemory => {
                self.c.store_no_memory += 1;
                return response::server_error(out, OOM_STORING);
            }
        };
        let mut r = MetaReply::new(out, code);
        for f in flags.iter() {
            match f.flag {
                b'O' => r = r.flag_bytes(b'O', f.token),
                b'k' => r = r.key(key, binary),
                b'c' => r = r.flag_num(b'c', cas),
                b's' => r = r.flag_num(b's', len as u64),
                _ => {}
            }
        }
        r.finish();
    }

    pub(super) fn md(&mut self, raw_key: &[u8], flags: MetaFlags<'_>, out: &mut Vec<u8>) {
        self.c.cmd_meta += 1;
        let Some(key) = Self::meta_key(self.key_buf, raw_key, flags) else {
            return response::client_error(out, "error decoding key");
        };
        if refuses_client_cas(&self.shared.store, flags) {
            return response::client_error(out, "invalid or duplicate flag");
        }
        let binary = flags.base64_key();
        let now = now_ms();
        let cas_in = flags.u64(b'C');
        let new_cas = flags.u64(b'E');
        let ttl = flags.i64(b'T').map(|t| Expiry::from_exptime(t, now));

        #[derive(PartialEq)]
        enum Md {
            Deleted,
            Invalidated,
            NotFound,
            Exists,
            OutOfMemory,
        }
        let result = self.shared.store.write(self.author, key, |e| {
            let Some(item) = e.item() else {
                return Md::NotFound;
            };
            if cas_in.is_some_and(|c| c != item.cas()) {
                return Md::Exists;
            }
            let old_cas = item.cas();
            if flags.has(b'x') {
                // Replace the value by an empty one: a tombstone, stale with `I`.
                let deadline = ttl.unwrap_or(Expiry::Never).deadline();
                let client_flags = flags.u32(b'F').unwrap_or(0);
                if e.put(Kind::String, b"", deadline, client_flags).is_err() {
                    return Md::OutOfMemory;
                }
                e.set_cas(new_cas.unwrap_or(old_cas));
            }
            if !flags.has(b'I') {
                if !flags.has(b'x') {
                    e.remove();
                }
                return Md::Deleted;
            }
            // Invalidate: keep the record, mark it stale, give it a new CAS (and maybe TTL).
            match ttl {
                Some(Expiry::Expired) => {
                    e.remove();
                    return Md::Invalidated;
                }
                Some(expiry) => {
                    let _ = e.set_expire(expiry.deadline());
                }
                None => {
                    // Rewriting the same deadline is how a record gets a fresh CAS.
                    let deadline = e.item().and_then(|i| i.expire_at());
                    let _ = e.set_expire(deadline);
                }
            }
            e.set_marks(true, false);
            if let Some(c) = new_cas {
                e.set_cas(c);
            }
            Md::Invalidated
        });
        let code = match result {
            Md::Deleted => {
                self.c.delete_hits += 1;
                MetaCode::Hd
            }
            Md::Invalidated => MetaCode::Hd,
            Md::NotFound => {
                self.c.delete_misses += 1;
                MetaCode::Nf
            }
            Md::Exists => {
                self.c.delete_misses += 1;
                MetaCode::Ex
            }
            Md::OutOfMemory => return response::server_error(out, "out of memory"),
        };
        // Quiet mode hides only success: a miss (NF) is still answered, as memcached does.
        if flags.quiet() && code == MetaCode::Hd {
            return;
        }
        status(out, code, flags, key, binary);
    }

    pub(super) fn ma(&mut self, raw_key: &[u8], flags: MetaFlags<'_>, out: &mut Vec<u8>) {
        self.c.cmd_meta += 1;
        let Some(key) = Self::meta_key(self.key_buf, raw_key, flags) else {
            return response::client_error(out, "error decoding key");
        };
        if refuses_client_cas(&self.shared.store, flags) {
            return response::client_error(out, "invalid or duplicate flag");
        }
        let binary = flags.base64_key();
        let now = now_ms();
        let incr = flags.arith_mode() == memcache::ArithMode::Incr;
        let delta = flags.u64(b'D').unwrap_or(1);

        enum Ma {
            Done { created: bool },
            Failed(Delta),
            NotStored,
        }
        let result = self.shared.store.write(self.author, key, |e| {
            let mut created = false;
            let (value, cas) = match apply_delta(e, incr, delta, flags.u64(b'C')) {
                Delta::Done(value, cas) => (value, cas),
                Delta::NotFound => {
                    let Some(ttl) = flags.i64(b'N') else {
                        return Ma::Failed(Delta::NotFound);
                    };
                    let initial = flags.u64(b'J').unwrap_or(0);
                    let mut digits = itoa::Buffer::new();
                    let deadline = Expiry::from_exptime(ttl, now).deadline();
                    match e.put(Kind::String, digits.format(initial).as_bytes(), deadline, 0) {
                        Ok(cas) => {
                            created = true;
                            (initial, cas)
                        }
                        Err(_) => return Ma::NotStored,
                    }
                }
                other => return Ma::Failed(other),
            };
            let cas = match flags.u64(b'E') {
                Some(c) => {
                    e.set_cas(c);
                    c
                }
                None => cas,
            };
            // Walk the flags in order: `t` shows the deadline as of its position. Under `q` a
            // success is not answered at all, but `T` and `N` still apply.
            let mut deadline = if created {
                None
            } else {
                e.item().and_then(|i| i.expire_at())
            };
            let mut expired = false;
            let with_value = flags.has(b'v');
            let mut digits = itoa::Buffer::new();
            let text = digits.format(value).as_bytes();
            let mark = out.len();
            let mut r = if with_value {
                MetaReply::value(out, text.len())
            } else {
                MetaReply::new(out, MetaCode::Hd)
            };
            for f in flags.iter() {
                match f.flag {
                    b'c' => r = r.flag_num(b'c', cas),
                    b't' => r = r.flag_int(b't', ttl_secs(deadline, now)),
                    b'T' => {
                        let expiry = Expiry::from_exptime(flags.i64(b'T').unwrap_or(0), now);
                        expired = expiry == Expiry::Expired;
                        deadline = expiry.deadline();
                    }
                    b'N' if created => deadline = e.item().and_then(|i| i.expire_at()),
                    b'O' => r = r.flag_bytes(b'O', f.token),
                    b'k' => r = r.key(key, binary),
                    _ => {}
                }
            }
            if with_value {
                r.finish_with_data(text);
            } else {
                r.finish();
            }
            if flags.quiet() {
                out.truncate(mark);
            }
            if expired {
                e.remove();
            } else {
                retime(e, deadline);
            }
            Ma::Done { created }
        });
        match result {
            Ma::Done { created: false, .. } if incr => self.c.incr_hits += 1,
            Ma::Done { created: false, .. } => self.c.decr_hits += 1,
            Ma::Failed(Delta::NotFound) if incr => self.c.incr_misses += 1,
            Ma::Failed(Delta::NotFound) => self.c.decr_misses += 1,
            _ => {}
        }
        match result {
            Ma::Done { .. } => {}
            Ma::NotStored => status(out, MetaCode::Ns, flags, key, binary),
            Ma::Failed(Delta::NotFound) => status(out, MetaCode::Nf, flags, key, binary),
            Ma::Failed(Delta::CasMismatch) => status(out, MetaCode::Ex, flags, key, binary),
            Ma::Failed(Delta::NonNumeric) => {
                response::client_error(out, "cannot increment or decrement non-numeric value")
            }
            Ma::Failed(Delta::OutOfMemory) => response::server_error(out, "out of memory"),
            Ma::Failed(Delta::Done(..)) => {}
        }
    }

    pub(super) fn me(&mut self, raw_key: &[u8], flags: MetaFlags<'_>, out: &mut Vec<u8>) {
        self.c.cmd_meta += 1;
        let Some(key) = Self::meta_key(self.key_buf, raw_key, flags) else {
            return response::client_error(out, "error decoding key");
        };
        let binary = flags.base64_key();
        let now = now_ms();
        // Under the exclusive lock, which does not count as an access.
        let found = self
            .shared
            .store
            .write(self.author, key, |e| match e.item() {
                Some(item) if is_string(item.kind()) => {
                    let size = item.key().len() + item.value().len() + 48;
                    MetaDebugReply::new(out, key, binary)
                        .int("exp", ttl_secs(item.expire_at(), now))
                        .num("la", 0)
                        .num("cas", item.cas())
                        .field("fetch", if item.was_hit() { "yes" } else { "no" })
                        .num("cls", 1)
                        .num("size", size as u64)
                        .finish();
                    true
                }
                _ => false,
            });
        if !found {
            out.extend_from_slice(b"EN\r\n");
        }
    }
}

fn store_args<'v>(value: &'v [u8], cond: Cond, expiry: Expiry, flags: u32) -> StoreArgs<'v> {
    StoreArgs {
        value,
        cond,
        ttl: Ttl::Set(expiry.deadline()),
        flags,
        cas: None,
    }
}

fn count_mg(c: &mut Counters, hit: bool, ttl_set: bool) {
    match (ttl_set, hit) {
        (true, true) => {
            c.cmd_touch += 1;
            c.touch_hits += 1;
        }
        (true, false) => {
            c.cmd_touch += 1;
            c.touch_misses += 1;
        }
        (false, true) => {
            c.cmd_get += 1;
            c.get_hits += 1;
        }
        (false, false) => {
            c.cmd_get += 1;
            c.get_misses += 1;
        }
    }
}
