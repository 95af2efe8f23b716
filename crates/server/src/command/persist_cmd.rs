//! SAVE, BGSAVE, LASTSAVE, SHUTDOWN and DEBUG RELOAD: the commands over snapshots
//! (`crate::snapshot`), and the save a shutdown makes (also used on SIGTERM / SIGINT).

use store::{Author, Db};

use super::{Ctx, SYNTAX};
use crate::shared::Shared;
use crate::snapshot::Damaged;

pub fn save(ctx: &mut Ctx<'_, '_>) {
    let (target, delay) = ctx.shared.snapshot_target();
    match ctx.shared.persistence.save(&target, delay) {
        Ok(_) => ctx.ok(),
        Err(e) if e == crate::snapshot::SAVE_IN_PROGRESS => ctx.err(e.as_bytes()),
        Err(e) => {
            tracing::error!("SAVE failed: {e}");
            ctx.err(format!("ERR {e}").as_bytes())
        }
    }
}

pub fn bgsave(ctx: &mut Ctx<'_, '_>) {
    match ctx.argc() {
        1 => {}
        2 if ctx.arg(1).eq_ignore_ascii_case(b"schedule") => {}
        _ => return ctx.err(SYNTAX),
    }
    // Inside EXEC the keyspace is held: the save is scheduled and starts after (Redis
    // schedules it too). SCHEDULE otherwise changes nothing: it waits for other background
    // work (Redis's AOF rewrite), which cairn does not have, not for a running save.
    if matches!(ctx.db, Db::Locked(_)) {
        ctx.shared
            .persistence
            .bgsave_scheduled
            .store(true, std::sync::atomic::Ordering::Relaxed);
        return ctx.simple(b"Background saving scheduled");
    }
    match ctx.shared.bgsave() {
        Ok(()) => ctx.simple(b"Background saving started"),
        Err(e) => ctx.err(e.as_bytes()),
    }
}

pub fn lastsave(ctx: &mut Ctx<'_, '_>) {
    let t = ctx.shared.persistence.last_save_time();
    ctx.int(t as i64)
}

/// The save a shutdown makes: `save` says SAVE (true) or NOSAVE (false); None follows
/// `save-on-shutdown`. Nothing is saved while the dataset is still loading (the file on disk
/// is the complete one). Waits for a background save that runs.
pub fn shutdown_save(shared: &Shared, save: Option<bool>) -> Result<(), String> {
    let wanted = save.unwrap_or_else(|| shared.settings.persist.read().saves_on_shutdown());
    if !wanted || shared.persistence.loading() {
        return Ok(());
    }
    shared.persistence.wait_for_saves();
    let (target, _) = shared.snapshot_target();
    tracing::info!("saving the final snapshot before exiting");
    let report = shared.persistence.save(&target, 0)?;
    tracing::info!(
        "snapshot saved: {} keys, {} bytes in {}",
        report.records,
        report.file_bytes,
        report.path.display()
    );
    Ok(())
}

pub fn shutdown(ctx: &mut Ctx<'_, '_>) {
    let (mut save, mut abort, mut force) = (None, false, false);
    for i in 1..ctx.argc() {
        match ctx.arg(i).to_ascii_lowercase().as_slice() {
            b"nosave" if save.is_none() => save = Some(false),
            b"save" if save.is_none() => save = Some(true),
            b"now" => {}
            b"force" => force = true,
            b"abort" => abort = true,
            _ => return ctx.err(SYNTAX),
        }
    }
    if abort {
        if ctx.argc() > 2 {
            return ctx.err(SYNTAX);
        }
        // A shutdown here never waits for replicas, so none is ever pending.
        return ctx.err(b"ERR No shutdown in progress.");
    }
    if let Err(e) = shutdown_save(ctx.shared, save) {
        tracing::error!("error trying to save the snapshot before shutting down: {e}");
        if !force {
            return ctx.err(b"ERR Errors trying to SHUTDOWN. Check logs.");
        }
    }
    tracing::info!("SHUTDOWN: exiting");
    // The client sees the connection close, as from Redis.
    std::process::exit(0);
}

/// DEBUG: only RELOAD (save, empty the keyspace, load the file back), for tests.
pub fn debug(ctx: &mut Ctx<'_, '_>) {
    if !ctx.arg(1).eq_ignore_ascii_case(b"reload") {
        return ctx.unknown_subcommand("DEBUG");
    }
    if matches!(ctx.db, Db::Locked(_)) {
        return ctx.err(b"ERR DEBUG RELOAD cannot run inside a transaction");
    }
    let shared = ctx.shared;
    let (target, delay) = shared.snapshot_target();
    if let Err(e) = shared.persistence.save(&target, delay) {
        tracing::error!("DEBUG RELOAD: {e}");
        return ctx.err(b"ERR Error trying to save the DB");
    }
    // Other clients get -LOADING from before the keyspace empties until it is back.
    shared.persistence.set_loading();
    shared.store.flush_by(Author::SERVER);
    let skip = shared.settings.persist.read().load_damaged_skip;
    let damaged = if skip { Damaged::Skip } else { Damaged::Refuse };
    let key_delay = shared.settings.persist.read().key_load_delay;
    match shared
        .persistence
        .load(&target.path(), damaged, load_threads(), key_delay)
    {
        Ok(_) => ctx.ok(),
        Err(e) => {
            tracing::error!("DEBUG RELOAD: {e}");
            ctx.err(b"ERR Error trying to load the RDB dump, check server logs.")
        }
    }
}

/// Threads a load uses: one per core.
pub fn load_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
