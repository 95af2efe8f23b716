//! The classic text commands.

use std::sync::atomic::Ordering::Relaxed;

use memcache::{response, Keys, StoreKind};
use store::now_ms;

use super::{is_string, parse_counter, retime, Exec, Expiry};
use crate::keyspace::{self as ops, Cond, StoreArgs, StoreOutcome, Ttl};

/// Result of a storage command, before it is written as a reply.
enum Stored {
    Outcome(StoreOutcome),
    /// append/prepend of a record that is not a memcached value, or would outgrow the limit.
    Refused,
}

pub(super) const OOM_STORING: &str = "out of memory storing object";
const NON_NUMERIC: &str = "cannot increment or decrement non-numeric value";

impl Exec<'_> {
    pub(super) fn get(&mut self, keys: Keys<'_>, with_cas: bool, out: &mut Vec<u8>) {
        let store = &self.shared.store;
        for key in keys {
            self.c.cmd_get += 1;
            let hit = store.read(key, |item| match item {
                Some(item) if is_string(item.kind()) => {
                    let cas = with_cas.then(|| item.cas());
                    response::value(out, key, item.flags(), item.value(), cas);
                    true
                }
                _ => false,
            });
            if hit {
                self.c.get_hits += 1;
            } else {
                self.c.get_misses += 1;
            }
        }
        response::end(out);
    }

    /// `gat`/`gats`: counted as memcached does, as touches only.
    pub(super) fn gat(&mut self, exptime: i64, keys: Keys<'_>, with_cas: bool, out: &mut Vec<u8>) {
        let store = &self.shared.store;
        let expiry = Expiry::now(exptime);
        for key in keys {
            self.c.cmd_touch += 1;
            let hit = store.write(self.author(), key, |e| {
                match e.item() {
                    Some(item) if is_string(item.kind()) => {}
                    _ => return false,
                }
                if expiry != Expiry::Expired {
                    retime(e, expiry.deadline());
                }
                if let Some(item) = e.item() {
                    let cas = with_cas.then(|| item.cas());
                    response::value(out, key, item.flags(), item.value(), cas);
                }
                if expiry == Expiry::Expired {
                    e.remove();
                }
                true
            });
            if hit {
                self.c.touch_hits += 1;
            } else {
                self.c.touch_misses += 1;
            }
        }
        response::end(out);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn store(
        &mut self,
        kind: StoreKind,
        key: &[u8],
        flags: u32,
        exptime: i64,
        data: &[u8],
        cas_unique: u64,
        noreply: bool,
        out: &mut Vec<u8>,
    ) {
        self.c.cmd_set += 1;
        let max_value = self.shared.settings.max_value_size.load(Relaxed);
        let expiry = Expiry::now(exptime);
        let result = self.shared.store.write(self.author(), key, |e| match kind {
            StoreKind::Append | StoreKind::Prepend => {
                match e.item() {
                    None => return Stored::Outcome(StoreOutcome::NotStored),
                    Some(item) if !is_string(item.kind()) => return Stored::Refused,
                    Some(item) if item.value().len().saturating_add(data.len()) > max_value => {
                        return Stored::Refused
                    }
                    Some(_) => {}
                }
                Stored::Outcome(match ops::concat(e, data, kind == StoreKind::Prepend) {
                    Ok(Some(_)) => StoreOutcome::Stored(0),
                    Ok(None) => StoreOutcome::NotStored,
                    Err(_) => StoreOutcome::OutOfMemory,
                })
            }
            StoreKind::Set if expiry == Expiry::Expired => {
                // Stored and gone at once: nothing to keep.
                e.remove();
                Stored::Outcome(StoreOutcome::Stored(0))
            }
            _ => {
                let cond = match kind {
                    StoreKind::Add => Cond::IfAbsent,
                    StoreKind::Replace => Cond::IfPresent,
                    _ => Cond::Always,
                };
                let cas = (kind == StoreKind::Cas).then_some(cas_unique);
                let args = StoreArgs {
                    value: data,
                    cond,
                    ttl: Ttl::Set(expiry.deadline()),
                    flags,
                    cas,
                };
                let outcome = ops::store(e, &args);
                match outcome {
                    StoreOutcome::Stored(_) if expiry == Expiry::Expired => {
                        e.remove();
                    }
                    // Do not leave the old value readable after a failed set.
                    StoreOutcome::OutOfMemory if kind == StoreKind::Set => {
                        e.remove();
                    }
                    _ => {}
                }
                Stored::Outcome(outcome)
            }
        });
        if kind == StoreKind::Cas {
            match result {
                Stored::Outcome(StoreOutcome::Stored(_)) => self.c.cas_hits += 1,
                Stored::Outcome(StoreOutcome::Exists) => self.c.cas_badval += 1,
                Stored::Outcome(StoreOutcome::NotFound) => self.c.cas_misses += 1,
                _ => {}
            }
        }
        if let Stored::Outcome(StoreOutcome::OutOfMemory) = result {
            self.c.store_no_memory += 1;
        }
        if noreply {
            return;
        }
        match result {
            Stored::Outcome(StoreOutcome::Stored(_)) => response::stored(out),
            Stored::Outcome(StoreOutcome::NotStored) | Stored::Refused => response::not_stored(out),
            Stored::Outcome(StoreOutcome::Exists) => response::exists(out),
            Stored::Outcome(StoreOutcome::NotFound) => response::not_found(out),
            Stored::Outcome(StoreOutcome::OutOfMemory) => response::server_error(out, OOM_STORING),
        }
    }

    pub(super) fn delete(&mut self, key: &[u8], noreply: bool, out: &mut Vec<u8>) {
        let deleted = self.shared.store.write(self.author(), key, |e| e.remove());
        if deleted {
            self.c.delete_hits += 1;
        } else {
            self.c.delete_misses += 1;
        }
        if !noreply {
            if deleted {
                response::deleted(out);
            } else {
                response::not_found(out);
            }
        }
    }

    /// `incr`/`decr`: unsigned 64-bit; incr wraps, decr stops at 0. TTL and flags are kept.
    pub(super) fn arith(
        &mut self,
        key: &[u8],
        delta: u64,
        incr: bool,
        noreply: bool,
        out: &mut Vec<u8>,
    ) {
        let result = self
            .shared
            .store
            .write(self.author(), key, |e| apply_delta(e, incr, delta, None));
        match result {
            Delta::Done(..) if incr => self.c.incr_hits += 1,
            Delta::Done(..) => self.c.decr_hits += 1,
            Delta::NotFound if incr => self.c.incr_misses += 1,
            Delta::NotFound => self.c.decr_misses += 1,
            _ => {}
        }
        if noreply {
            return;
        }
        match result {
            Delta::Done(n, _) => response::number(out, n),
            Delta::NotFound => response::not_found(out),
            Delta::NonNumeric => response::client_error(out, NON_NUMERIC),
            Delta::OutOfMemory => response::server_error(out, "out of memory"),
            // Only with a CAS to compare, which the text command has not.
            Delta::CasMismatch => response::exists(out),
        }
    }

    pub(super) fn touch(&mut self, key: &[u8], exptime: i64, noreply: bool, out: &mut Vec<u8>) {
        self.c.cmd_touch += 1;
        let expiry = Expiry::now(exptime);
        let touched = self.shared.store.write(self.author(), key, |e| {
            if !e.exists() {
                return false;
            }
            if expiry == Expiry::Expired {
                e.remove();
            } else {
                retime(e, expiry.deadline());
            }
            true
        });
        if touched {
            self.c.touch_hits += 1;
        } else {
            self.c.touch_misses += 1;
        }
        if !noreply {
            if touched {
                response::touched(out);
            } else {
                response::not_found(out);
            }
        }
    }

    /// `flush_all [delay]`: now, or from a timer thread once the delay has passed. A later
    /// `flush_all` replaces a pending one, as memcached's single flush deadline does.
    pub(super) fn flush_all(&mut self, delay: i64, noreply: bool, out: &mut Vec<u8>) {
        self.c.cmd_flush += 1;
        let timer = &self.shared.flush_timer;
        let now = now_ms();
        match Expiry::from_exptime(delay, now) {
            Expiry::At(at) if at > now => timer.schedule(&self.shared.store, at),
            _ => {
                timer.cancel();
                self.shared.store.flush();
            }
        }
        if !noreply {
            response::ok(out);
        }
    }
}

/// Outcome of an increment or decrement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Delta {
    /// New value and CAS.
    Done(u64, u64),
    NotFound,
    NonNumeric,
    CasMismatch,
    OutOfMemory,
}

/// memcached's `do_add_delta`: `cas`, when given and non-zero, must match the record's.
pub(super) fn apply_delta(
    e: &mut store::Entry<'_>,
    incr: bool,
    delta: u64,
    cas: Option<u64>,
) -> Delta {
    let Some(item) = e.item() else {
        return Delta::NotFound;
    };
    if !is_string(item.kind()) {
        return Delta::NonNumeric;
    }
    if let Some(cas) = cas.filter(|&c| c != 0) {
        if item.cas() != cas {
            return Delta::CasMismatch;
        }
    }
    let Some(current) = parse_counter(item.value()) else {
        return Delta::NonNumeric;
    };
    let next = if incr {
        current.wrapping_add(delta)
    } else {
        current.saturating_sub(delta)
    };
    let mut digits = itoa::Buffer::new();
    match ops::rewrite(e, digits.format(next).as_bytes()) {
        Ok(cas) => Delta::Done(next, cas),
        Err(_) => Delta::OutOfMemory,
    }
}
