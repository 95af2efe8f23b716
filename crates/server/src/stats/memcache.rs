//! memcached `stats` counters: per-connection tallies ([`Counters`]) that the front end flushes
//! into the server-wide [`McStats`].

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64};

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Per-connection tallies, flushed into [`McStats`] at the end of each `process` call so
        /// that requests do not each touch shared cache lines.
        #[derive(Default, Clone, Copy)]
        pub struct Counters {
            $(pub $name: u64,)*
        }

        /// memcached `stats` counters, shared by every connection (relaxed atomics).
        #[derive(Default)]
        pub struct McStats {
            $(pub $name: AtomicU64,)*
            /// `verbosity` level (0 to 2), shown by `stats settings`.
            pub verbosity: AtomicU32,
            /// The store's write count at the last `stats reset` (`total_items` counts from it).
            pub total_items_base: AtomicU64,
        }

        impl Counters {
            pub fn flush_into(&mut self, stats: &McStats) {
                $(
                    if self.$name != 0 {
                        stats.$name.fetch_add(self.$name, Relaxed);
                    }
                )*
                *self = Counters::default();
            }
        }

        impl McStats {
            pub fn snapshot(&self) -> Counters {
                Counters { $($name: self.$name.load(Relaxed),)* }
            }

            pub fn reset(&self) {
                $(self.$name.store(0, Relaxed);)*
            }
        }
    };
}

counters!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    cmd_meta,
    get_hits,
    get_misses,
    delete_hits,
    delete_misses,
    incr_hits,
    incr_misses,
    decr_hits,
    decr_misses,
    cas_hits,
    cas_misses,
    cas_badval,
    touch_hits,
    touch_misses,
    store_too_large,
    store_no_memory,
);
