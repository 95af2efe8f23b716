//! A small mutation fuzzer for the parsers' fuzz targets, on stable Rust and without dependencies.
//!
//! Each target (`tests/fuzz.rs` of `resp` and `memcache`) gives a corpus of valid frames, a
//! dictionary of protocol tokens and a check function that parses one input and asserts the
//! parser's invariants (it panics on a violation). [`run`] mutates corpus entries for a time
//! budget; inputs that produce an outcome not seen before (the check's return value, e.g. a new
//! error message) join the pool, a cheap stand-in for coverage feedback.
//!
//! Knobs: `CAIRN_FUZZ_SECS` (seconds per target; the caller's default otherwise),
//! `CAIRN_FUZZ_SEED` (default fixed, so `make test` is repeatable; `make fuzz` passes a fresh one).
//! A failure prints the target, the seed, the iteration and the input as an escaped byte string.
//!
//! The allocation counter ([`CountingAlloc`]) must be installed by the test binary as its
//! `#[global_allocator]`; it counts bytes allocated by the current thread, so the checks can
//! assert that a parser allocates nothing, or no more than its input justifies.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// splitmix64: tiny, fast, good enough to drive mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `1/n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Numbers that sit on parsers' edges, in the text form protocols use.
const NUMBERS: &[&[u8]] = &[
    b"0",
    b"1",
    b"-1",
    b"-2",
    b"2",
    b"16",
    b"250",
    b"251",
    b"1024",
    b"2048",
    b"65535",
    b"65536",
    b"2147483647",
    b"2147483648",
    b"-2147483648",
    b"4294967295",
    b"4294967296",
    b"536870912",
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999",
    b"+1",
    b"01",
    b"-0",
    b"1e3",
    b" 1",
];

/// Longest input the mutator builds.
pub const MAX_INPUT: usize = 8192;

/// One random edit of `buf`.
pub fn mutate(rng: &mut Rng, buf: &mut Vec<u8>, dictionary: &[&[u8]], pool: &[Vec<u8>]) {
    let at = |rng: &mut Rng, buf: &Vec<u8>| rng.below(buf.len() + 1);
    match rng.below(12) {
        0 if !buf.is_empty() => {
            let i = rng.below(buf.len());
            buf[i] ^= 1 << rng.below(8);
        }
        1 if !buf.is_empty() => {
            let i = rng.below(buf.len());
            buf[i] = rng.next() as u8;
        }
        2 => {
            let i = at(rng, buf);
            buf.insert(i, rng.next() as u8);
        }
        3 if !buf.is_empty() => {
            let i = rng.below(buf.len());
            let n = 1 + rng.below((buf.len() - i).min(16));
            buf.drain(i..i + n);
        }
        4 if !buf.is_empty() => {
            // Duplicate a range: repeated headers, arguments, whole frames.
            let i = rng.below(buf.len());
            let n = 1 + rng.below((buf.len() - i).min(64));
            let piece = buf[i..i + n].to_vec();
            let j = at(rng, buf);
            buf.splice(j..j, piece);
        }
        5 | 6 => {
            let i = at(rng, buf);
            let token = *rng.pick(dictionary);
            buf.splice(i..i, token.iter().copied());
        }
        7 => {
            // Replace a run of digits (or insert) with an edge number.
            let number = *rng.pick(NUMBERS);
            let digits: Vec<usize> = (0..buf.len())
                .filter(|&i| buf[i].is_ascii_digit())
                .collect();
            if digits.is_empty() {
                let i = at(rng, buf);
                buf.splice(i..i, number.iter().copied());
            } else {
                let start = *rng.pick(&digits);
                let end = (start..buf.len())
                    .find(|&i| !buf[i].is_ascii_digit())
                    .unwrap_or(buf.len());
                buf.splice(start..end, number.iter().copied());
            }
        }
        8 if !pool.is_empty() => {
            // Splice: the head of this input and the tail of another.
            let other = rng.pick(pool);
            let i = at(rng, buf);
            let j = rng.below(other.len() + 1);
            buf.truncate(i);
            buf.extend_from_slice(&other[j..]);
        }
        9 if !pool.is_empty() => {
            // Pipelining: another whole input after this one.
            let other = rng.pick(pool).clone();
            buf.extend_from_slice(&other);
        }
        10 => {
            let i = at(rng, buf);
            buf.truncate(i);
        }
        _ => {
            let i = at(rng, buf);
            const BYTES: &[&[u8]] = &[b"\r\n", b"\n", b"\r", b" ", b"\0", b"\xff"];
            let bytes = *rng.pick(BYTES);
            buf.splice(i..i, bytes.iter().copied());
        }
    }
    buf.truncate(MAX_INPUT);
}

/// The time budget of one target: `CAIRN_FUZZ_SECS` or `default_secs`.
pub fn budget(default_secs: f64) -> Duration {
    let secs = std::env::var("CAIRN_FUZZ_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(default_secs);
    Duration::from_secs_f64(secs.max(0.0))
}

pub fn seed() -> u64 {
    std::env::var("CAIRN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0x5eed_cafe)
}

/// Fuzzes `check` for `budget`: corpus entries first, unchanged, then mutants. `check` returns
/// an outcome signature; inputs with a new one are kept for further mutation.
pub fn run(
    name: &str,
    budget: Duration,
    corpus: &[&[u8]],
    dictionary: &[&[u8]],
    mut check: impl FnMut(&[u8], &mut Rng) -> u64,
) {
    let base_seed = seed();
    let seed = base_seed ^ hash(name.as_bytes());
    let mut rng = Rng::new(seed);
    let mut pool: Vec<Vec<u8>> = corpus.iter().map(|c| c.to_vec()).collect();
    let mut seen: HashSet<u64> = HashSet::new();
    let start = Instant::now();
    let mut iterations: u64 = 0;
    let mut input = Vec::new();
    loop {
        if iterations < pool.len() as u64 {
            input.clone_from(&pool[iterations as usize]);
        } else {
            if iterations.is_multiple_of(64) && start.elapsed() >= budget {
                break;
            }
            input.clone_from(rng.pick(&pool));
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut input, dictionary, &pool);
            }
        }
        // The check gets its own generator, derived from the iteration, so that a failure can
        // be replayed from (seed, input) alone.
        let mut check_rng = Rng::new(seed ^ iterations.wrapping_mul(0x9e37_79b9));
        let outcome = catch_unwind(AssertUnwindSafe(|| check(&input, &mut check_rng)));
        match outcome {
            Ok(signature) => {
                if seen.insert(signature) && pool.len() < 4096 {
                    pool.push(input.clone());
                }
            }
            Err(panic) => {
                eprintln!(
                    "fuzz target {name} failed: CAIRN_FUZZ_SEED={} iteration {iterations}, check seed {:#x}\n  input ({} bytes): b\"{}\"",
                    base_seed,
                    seed ^ iterations.wrapping_mul(0x9e37_79b9),
                    input.len(),
                    input.escape_ascii()
                );
                std::panic::resume_unwind(panic);
            }
        }
        iterations += 1;
    }
    eprintln!(
        "fuzz target {name}: {iterations} inputs in {:.1}s, {} outcomes, pool {}",
        start.elapsed().as_secs_f64(),
        seen.len(),
        pool.len()
    );
    assert!(iterations >= corpus.len() as u64);
}

/// FNV-1a, for outcome signatures.
/// Random cut points for feeding `len` bytes to a parser in pieces: mostly up to 64 bytes,
/// often tiny ones (up to 4), which split headers and CRLFs.
pub fn random_pieces(rng: &mut Rng, len: usize) -> Vec<usize> {
    let mut pieces = Vec::new();
    let mut left = len;
    while left > 0 {
        let largest = if rng.one_in(3) { 4 } else { 64 };
        let n = 1 + rng.below(left.min(largest));
        pieces.push(n);
        left -= n;
    }
    pieces
}

pub fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Counts the bytes the current thread allocates (see the module docs).
pub struct CountingAlloc;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: defers every call to the system allocator; the counter is a thread-local Cell with a
// const initialiser, which neither allocates nor needs a destructor.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(layout.size())));
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(layout.size())));
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let grown = new_size.saturating_sub(layout.size());
        let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(grown)));
        System.realloc(ptr, layout, new_size)
    }
}

/// Runs `f` and returns its result with the bytes this thread allocated meanwhile.
pub fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED.with(Cell::get);
    let out = f();
    (out, ALLOCATED.with(Cell::get) - before)
}
