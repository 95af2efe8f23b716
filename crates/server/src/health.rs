//! Readiness: whether the server should be sent traffic (`/readyz` of the metrics endpoint,
//! systemd's READY=1). A leaf: the parts that can make the server unready register a check
//! here (snapshot loading through `Shared`, a replica that has not finished its sync through
//! the replication module), and whoever reports readiness asks them all.
//!
//! Liveness (`/healthz`) is not decided here: a server that answers the request is alive.

use parking_lot::RwLock;

/// A check: None when ready, else why not (shown in `/readyz`'s body).
pub type Check = Box<dyn Fn() -> Option<String> + Send + Sync>;

/// The registered readiness checks, by name.
#[derive(Default)]
pub struct Readiness {
    checks: RwLock<Vec<(&'static str, Check)>>,
}

impl Readiness {
    /// Adds (or replaces) the check called `name`.
    pub fn register(&self, name: &'static str, check: Check) {
        let mut checks = self.checks.write();
        checks.retain(|(n, _)| *n != name);
        checks.push((name, check));
    }

    /// Ok when every check passes, else the reasons of those that fail (`name: reason`).
    pub fn status(&self) -> Result<(), Vec<String>> {
        let failing: Vec<String> = self
            .checks
            .read()
            .iter()
            .filter_map(|(name, check)| check().map(|why| format!("{name}: {why}")))
            .collect();
        if failing.is_empty() {
            Ok(())
        } else {
            Err(failing)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;

    #[test]
    fn ready_only_when_every_check_passes() {
        let readiness = Readiness::default();
        assert_eq!(readiness.status(), Ok(()));
        let synced = Arc::new(AtomicBool::new(false));
        let flag = synced.clone();
        readiness.register(
            "replication",
            Box::new(move || (!flag.load(Relaxed)).then(|| "sync in progress".into())),
        );
        assert_eq!(
            readiness.status(),
            Err(vec!["replication: sync in progress".to_string()])
        );
        synced.store(true, Relaxed);
        assert_eq!(readiness.status(), Ok(()));
        // Registering again under the same name replaces the check.
        readiness.register("replication", Box::new(|| Some("down".into())));
        assert_eq!(readiness.status().unwrap_err().len(), 1);
    }
}
