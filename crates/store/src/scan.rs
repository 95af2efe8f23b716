//! SCAN over the sharded keyspace with cursors that stay valid across table resizes.
//!
//! A cursor is `shard << 32 | position`, where position is a point of the shard's 32-bit hash
//! space. A key's home slot is the top bits of its position whatever the table size, so "every
//! key whose home lies in [a, b)" names the same keys before and after a resize: a key present for
//! the whole iteration is returned at least once (possibly twice after a shrink), as SCAN
//! promises.

use crate::item::Item;
use crate::shard::Shard;
use crate::table::Table;
use crate::{now_ms, Locked, Store};

fn split(cursor: u64) -> (usize, u32) {
    ((cursor >> 32) as usize, cursor as u32)
}

/// Visits live records whose home lies in the slots of `position`..+`slots` of one shard.
/// Returns the next position, or None when the shard is finished.
fn scan_shard(
    store: &Store,
    table: &Table,
    position: u32,
    slots: usize,
    visit: &mut impl FnMut(Item<'_>),
) -> Option<u32> {
    let cap = table.capacity();
    let start = table.home_of(crate::table::KeyHash((position as u64) << 32));
    let end = (start + slots).min(cap);
    let now = now_ms();
    let mut i = start;
    let mut walked = 0;
    // Keys homed in [start, end) may sit past `end` (linear probing), up to the next empty slot.
    while walked < cap && (i < end || !table.is_empty(i % cap)) {
        if let Some(item) = table.item_at(i % cap) {
            let home = table.home_of(store.hash(item.key()));
            let live = item.expire_at().is_none_or(|d| d > now);
            if live && home >= start && home < end {
                visit(Item::new(item));
            }
        }
        i += 1;
        walked += 1;
    }
    (end < cap).then(|| table.position_of_home(end) as u32)
}

fn step(
    store: &Store,
    cursor: u64,
    count: usize,
    mut shard_at: impl FnMut(usize, &mut dyn FnMut(&Shard) -> Option<u32>) -> Option<u32>,
    mut visit: impl FnMut(Item<'_>),
) -> u64 {
    let (mut shard, mut position) = split(cursor);
    let mut seen = 0;
    let want = count.max(1);
    while shard < store.shard_count() {
        let next = shard_at(shard, &mut |s: &Shard| {
            scan_shard(store, &s.table, position, want * 2, &mut |item: Item<
                '_,
            >| {
                seen += 1;
                visit(item)
            })
        });
        match next {
            Some(p) => position = p,
            None => {
                shard += 1;
                position = 0;
            }
        }
        if seen >= want {
            break;
        }
    }
    if shard >= store.shard_count() {
        0
    } else {
        ((shard as u64) << 32) | position as u64
    }
}

pub(crate) fn scan_shared(
    store: &Store,
    cursor: u64,
    count: usize,
    visit: impl FnMut(Item<'_>),
) -> u64 {
    step(
        store,
        cursor,
        count,
        |index, f| f(&store.cell(index).lock.read()),
        visit,
    )
}

pub(crate) fn scan_locked(
    locked: &mut Locked<'_>,
    cursor: u64,
    count: usize,
    visit: impl FnMut(Item<'_>),
) -> u64 {
    let store = locked.store;
    step(
        store,
        cursor,
        count,
        |index, f| {
            let pos = locked
                .guards
                .binary_search_by_key(&index, |(i, _)| *i)
                .expect("scan needs every shard locked");
            f(&locked.guards[pos].1)
        },
        visit,
    )
}
