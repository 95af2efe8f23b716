//! Output-buffer limits of one connection, by Redis's client classes (`client-output-buffer-limit`).
//!
//! A normal client's output only grows while it sends requests, and with no normal-class limit
//! (the default) the runtime stops reading those while the socket is full, so its output stays
//! bounded without cutting it. Pushed messages (pub/sub, tracking invalidations) grow without
//! the client asking: the pubsub class bounds a subscriber's whole output, and the pushed part
//! of anyone else's.

use crate::config::{ClassLimit, OutputLimits};

#[derive(Default)]
pub struct OutputGuard {
    /// Pushed-message bytes appended since the output was last drained: `min(pushed, pending)`
    /// bounds the unsent messages.
    pushed: usize,
    /// When (ms) the output was first seen over the soft limit of the pubsub class [0] and of
    /// the normal class [1]; 0 = not over.
    soft_since: [u64; 2],
}

impl OutputGuard {
    /// `bytes` of pushed messages were appended to the output.
    pub fn pushed(&mut self, bytes: usize) {
        self.pushed += bytes;
    }

    /// Everything was written.
    pub fn drained(&mut self) {
        self.pushed = 0;
        self.soft_since = [0; 2];
    }

    /// Whether `pending` unsent bytes break a limit: the client must be cut.
    pub fn over(
        &mut self,
        pending: usize,
        subscribed: bool,
        limits: &OutputLimits,
        now_ms: u64,
    ) -> bool {
        let (pushed, replies) = if subscribed {
            (pending, 0)
        } else {
            (pending.min(self.pushed), pending)
        };
        let [pubsub_since, normal_since] = &mut self.soft_since;
        let cut_pubsub = over_limit(&limits.pubsub, pushed, pubsub_since, now_ms);
        let cut_normal = over_limit(&limits.normal, replies, normal_since, now_ms);
        cut_pubsub || cut_normal
    }
}

/// Whether `bytes` break `limit`: past its hard limit at once, past its soft limit once `since`
/// (when first seen over it) is `soft_secs` seconds old.
fn over_limit(limit: &ClassLimit, bytes: usize, since: &mut u64, now_ms: u64) -> bool {
    let bytes = bytes as u64;
    if limit.hard != 0 && bytes > limit.hard {
        return true;
    }
    if limit.soft == 0 || bytes <= limit.soft {
        *since = 0;
        return false;
    }
    if *since == 0 {
        *since = now_ms.max(1);
        return false;
    }
    now_ms.saturating_sub(*since) >= limit.soft_secs.saturating_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> OutputLimits {
        OutputLimits::parse("normal 0 0 0 pubsub 1000 100 2").unwrap()
    }

    #[test]
    fn normal_replies_are_unlimited_by_default() {
        let mut g = OutputGuard::default();
        assert!(!g.over(1 << 30, false, &limits(), 1));
    }

    #[test]
    fn pubsub_hard_and_soft_limits() {
        let l = limits();
        let mut g = OutputGuard::default();
        assert!(g.over(1001, true, &l, 1));
        let mut g = OutputGuard::default();
        assert!(!g.over(500, true, &l, 1_000));
        assert!(!g.over(500, true, &l, 2_999));
        assert!(g.over(500, true, &l, 3_000));
        // Draining resets the soft-limit clock.
        let mut g = OutputGuard::default();
        assert!(!g.over(500, true, &l, 1_000));
        g.drained();
        assert!(!g.over(500, true, &l, 5_000));
    }

    #[test]
    fn pushed_messages_of_a_normal_client_are_pubsub_class() {
        let l = limits();
        let mut g = OutputGuard::default();
        // A big reply with few messages: not cut.
        g.pushed(50);
        assert!(!g.over(1 << 30, false, &l, 1));
        // Messages piling up: cut.
        g.pushed(2000);
        assert!(g.over(1 << 30, false, &l, 1));
        g.drained();
        assert!(!g.over(1 << 30, false, &l, 1));
    }
}
