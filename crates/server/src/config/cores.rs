//! How many event loops the reactor runs when `--threads` is not given.
//!
//! Measured on a 2-core machine (bench/results/threads.md, bench/results/scaling.md): a second
//! event loop costs 7–28% more server CPU per request than one (and, on a quiet machine, did a
//! third fewer operations per second), because on loopback most of a request's cost is the kernel's TCP path, which runs on the same
//! cores as the clients and the loops; two loops each find half as much work per `epoll_wait`,
//! so they block and wake (a context switch each way) about twice as often per request. A loop
//! pays off only when it has a core to itself and the kernel work beside it has another, so the
//! default is one loop per two available cores, and never fewer than one.

/// The reactor's event loops for `cores` available cores: one per two cores, at least one.
/// So 1–3 cores get 1 loop (the configuration that costs least per request there), 4 get 2,
/// 16 get 8.
pub fn default_threads(cores: usize) -> usize {
    (cores / 2).max(1)
}

/// The cores this process may run on: its CPU affinity mask and, on Linux, its cgroup CPU
/// quota (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us`), as `std::thread::available_parallelism`
/// reads them; 1 when neither can be read.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_loop_per_two_cores_at_least_one() {
        let chosen: Vec<usize> = [0, 1, 2, 3, 4, 5, 8, 16, 64]
            .iter()
            .map(|&c| default_threads(c))
            .collect();
        assert_eq!(chosen, [1, 1, 1, 1, 2, 2, 4, 8, 32]);
    }

    #[test]
    fn available_cores_follows_the_affinity_mask() {
        // Pin this test's thread to its first allowed CPU: the count must drop to 1 (it would
        // not if the default counted the machine's CPUs), and come back once unpinned.
        // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls only read and write it,
        // and pid 0 is this thread.
        unsafe {
            let mut all: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of_val(&all);
            assert_eq!(libc::sched_getaffinity(0, size, &mut all), 0);
            let first = (0..libc::CPU_SETSIZE as usize)
                .find(|&c| libc::CPU_ISSET(c, &all))
                .unwrap();
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(first, &mut one);
            assert_eq!(libc::sched_setaffinity(0, size, &one), 0);
            let pinned = available_cores();
            assert_eq!(libc::sched_setaffinity(0, size, &all), 0);
            assert_eq!(pinned, 1);
            assert!(available_cores() <= libc::CPU_COUNT(&all) as usize);
        }
    }
}
