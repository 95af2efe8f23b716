//! TAG.DEL of a large group, run on a helper thread instead of the event loop.
//!
//! A group delete of 100k records takes ~35 ms of CPU; on the loop that was a 35 ms stall for
//! every client of the thread (issue 19, part 4). Like a SQL statement handed to the engine,
//! the handler hands a large delete to the `cairn-groups` thread and marks the connection
//! waiting; the count comes back through the client's mailbox, so the client's next command
//! still sees the group gone. The delete itself is the store's (`Store::tag_delete`), with its
//! atomicity for group reads unchanged. Small groups, transactions, scripts, the replication
//! stream and write-behind (whose changes must reach their logs before the reply) keep running
//! it in place. The slow log and LATENCY see the hand-over, not the delete
//! (`observe_hook::DeferredCall` files its time under the `sql` event).

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};

use store::{Db, Query};

use super::Ctx;

/// Groups that may hold this many records or more are deleted off the loop: below it the
/// delete takes about as long as handing it over.
const OFF_LOOP_AT: usize = 1024;
/// Deletes waiting for the helper thread; past it a delete runs in place (bounded queue).
const QUEUE: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

/// The helper thread's queue, started on first use (`None` if the thread could not start).
fn helper() -> Option<&'static SyncSender<Job>> {
    static HELPER: OnceLock<Option<SyncSender<Job>>> = OnceLock::new();
    HELPER
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Job>(QUEUE);
            std::thread::Builder::new()
                .name("cairn-groups".into())
                .spawn(move || rx.into_iter().for_each(|job| job()))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Hands the delete of `query`'s group to the helper thread when it is large and this caller
/// may wait for a reply; true when it did (the reply comes later), false to run it in place.
pub(super) fn hand_off(ctx: &mut Ctx<'_, '_>, query: &Query) -> bool {
    // A client's own command only: a script (which holds every gate while it runs, so one is
    // running exactly when this is called from it) and EXEC need the count now.
    if !matches!(ctx.db, Db::Shared(..))
        || ctx.shared.scripts.running().is_some()
        || ctx.shared.writeback.active()
        || !ctx.shared.store.tag_group_at_least(query, OFF_LOOP_AT)
    {
        return false;
    }
    let Some(helper) = helper() else {
        return false;
    };
    let store = Arc::clone(&ctx.shared.store);
    let author = ctx.conn.author();
    let query = query.clone();
    // Held weakly: the delete runs even if the client goes, but its state is not kept alive.
    let client = Arc::downgrade(&ctx.conn.client);
    ctx.conn.waiting = true;
    let job: Job = Box::new(move || {
        let n = store.tag_delete(author, &query);
        if let Some(client) = client.upgrade() {
            let mut out = Vec::new();
            resp::reply::integer(&mut out, n as i64);
            client.post(&out, true);
        }
    });
    match helper.try_send(job) {
        Ok(()) => true,
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            ctx.conn.waiting = false;
            false
        }
    }
}
