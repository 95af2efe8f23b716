//! Random numbers, key distributions, value sizes and the read/write mix.
//!
//! Everything here is deterministic for a given seed, allocation-free per
//! draw, and cheap enough (a few ns) never to show up next to a syscall.

use std::fmt;
use std::str::FromStr;

/// xoshiro256** seeded through splitmix64: fast, small, good enough for load.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut st = seed;
        let s = [
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
        ];
        Rng { s }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n) (Lemire's multiply-shift; the bias is below 2^-64 * n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Which keys requests touch.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyDist {
    Uniform {
        n: u64,
    },
    Zipf(Zipf),
    /// Zipf requests interleaved with a sequential scan of the whole key space: each request
    /// is, with probability `share`, the scan's next key (the "table scan" that evicts a
    /// recency-only cache's hot set).
    Scan {
        zipf: Zipf,
        share: Mix,
        next: u64,
    },
    /// Zipf requests interleaved with a loop over the `len` least popular keys, read in the
    /// same order again and again: each request is, with probability `share`, the loop's
    /// next key. A loop longer than the cache defeats LRU and FIFO.
    Loop {
        zipf: Zipf,
        share: Mix,
        len: u64,
        next: u64,
    },
}

/// What the scan and loop streams mix into their Zipf requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pattern {
    /// Fraction of the requests that come from the scan or the loop.
    pub share: f64,
    /// Keys in the loop (0: 15% of the keys).
    pub loop_keys: u64,
}

impl Default for Pattern {
    fn default() -> Pattern {
        Pattern {
            share: 0.25,
            loop_keys: 0,
        }
    }
}

impl KeyDist {
    pub fn new(kind: DistKind, n: u64, s: f64, pattern: Pattern) -> KeyDist {
        match kind {
            DistKind::Uniform => KeyDist::Uniform { n },
            DistKind::Zipf => KeyDist::Zipf(Zipf::new(n, s)),
            DistKind::Scan => KeyDist::Scan {
                zipf: Zipf::new(n, s),
                share: Mix::new(pattern.share),
                next: 0,
            },
            DistKind::Loop => {
                let len = match pattern.loop_keys {
                    0 => (n * 15 / 100).max(1),
                    l => l.min(n),
                };
                KeyDist::Loop {
                    zipf: Zipf::new(n, s),
                    share: Mix::new(pattern.share),
                    len,
                    next: 0,
                }
            }
        }
    }

    /// A key index in [0, n). For Zipf, index 0 is the most popular key.
    #[inline]
    pub fn sample(&mut self, rng: &mut Rng) -> u64 {
        match self {
            KeyDist::Uniform { n } => rng.below(*n),
            KeyDist::Zipf(z) => z.sample(rng) - 1,
            KeyDist::Scan { zipf, share, next } => {
                if share.is_read(rng) {
                    let k = *next;
                    *next = (k + 1) % zipf.n;
                    k
                } else {
                    zipf.sample(rng) - 1
                }
            }
            KeyDist::Loop {
                zipf,
                share,
                len,
                next,
            } => {
                if share.is_read(rng) {
                    let k = zipf.n - *len + *next;
                    *next = (*next + 1) % *len;
                    k
                } else {
                    zipf.sample(rng) - 1
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistKind {
    Uniform,
    Zipf,
    Scan,
    Loop,
}

impl FromStr for DistKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(DistKind::Uniform),
            "zipf" | "zipfian" => Ok(DistKind::Zipf),
            "scan" => Ok(DistKind::Scan),
            "loop" => Ok(DistKind::Loop),
            _ => Err(format!(
                "unknown distribution {s:?} (uniform, zipf, scan or loop)"
            )),
        }
    }
}

impl fmt::Display for DistKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DistKind::Uniform => "uniform",
            DistKind::Zipf => "zipf",
            DistKind::Scan => "scan",
            DistKind::Loop => "loop",
        })
    }
}

/// Zipf over ranks 1..=n with P(k) proportional to k^-s, any s >= 0, sampled
/// in O(1) by rejection-inversion (Hörmann and Derflinger, 1996; the same
/// method as Apache Commons RNG's `RejectionInversionZipfSampler`). Unlike
/// YCSB's generator it needs no O(n) zeta sum and also works for s >= 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Zipf {
    n: u64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    threshold: f64,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Zipf {
        assert!(n >= 1, "zipf needs at least one key");
        assert!(s >= 0.0 && s.is_finite(), "zipf skew must be >= 0");
        let mut z = Zipf {
            n,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            threshold: 0.0,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(n as f64 + 0.5);
        z.threshold = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// A rank in 1..=n.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        loop {
            let u = self.h_n + rng.next_f64() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inverse(u);
            let mut k = (x + 0.5) as u64;
            if k < 1 {
                k = 1;
            } else if k > self.n {
                k = self.n;
            }
            let kf = k as f64;
            if kf - x <= self.threshold || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k;
            }
        }
    }

    /// The exact probability of rank k (O(n): for tests only).
    #[cfg(test)]
    pub fn pmf(&self, k: u64) -> f64 {
        let norm: f64 = (1..=self.n).map(|i| (i as f64).powf(-self.s)).sum();
        (k as f64).powf(-self.s) / norm
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.s) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.s);
        if t < -1.0 {
            t = -1.0;
        }
        (helper1(t) * x).exp()
    }
}

/// ln(1+x)/x, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x - 1)/x, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// Value sizes: fixed, or uniform over an inclusive range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueSize {
    pub min: usize,
    pub max: usize,
}

impl ValueSize {
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> usize {
        if self.min == self.max {
            self.min
        } else {
            self.min + rng.below((self.max - self.min + 1) as u64) as usize
        }
    }

    #[cfg(test)]
    pub fn mean(&self) -> f64 {
        (self.min + self.max) as f64 / 2.0
    }
}

/// Accepts `1024`, `1024+-500`, `1024±500` (both mean 524..=1524), `524..1524`
/// and `524-1524` (inclusive ranges). Sizes may end in `k` (x1024).
impl FromStr for ValueSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let num = |t: &str| -> Result<usize, String> {
            let t = t.trim();
            let (digits, mult) = match t.strip_suffix(['k', 'K']) {
                Some(d) => (d, 1024),
                None => (t, 1),
            };
            digits
                .parse::<usize>()
                .map(|v| v * mult)
                .map_err(|_| format!("bad value size {s:?}"))
        };
        let t = s.trim();
        let vs = if let Some((a, b)) = t.split_once("+-").or_else(|| t.split_once('±')) {
            let (mid, jitter) = (num(a)?, num(b)?);
            if jitter > mid {
                return Err(format!("value size {s:?}: the jitter exceeds the mean"));
            }
            ValueSize {
                min: mid - jitter,
                max: mid + jitter,
            }
        } else if let Some((a, b)) = t.split_once("..").or_else(|| t.split_once('-')) {
            ValueSize {
                min: num(a)?,
                max: num(b)?,
            }
        } else {
            let v = num(t)?;
            ValueSize { min: v, max: v }
        };
        if vs.min > vs.max {
            return Err(format!("value size {s:?}: min above max"));
        }
        Ok(vs)
    }
}

impl fmt::Display for ValueSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}..{}", self.min, self.max)
        }
    }
}

/// The read/write mix: a request is a read with probability `read_ratio`.
/// Decided with an integer threshold so 0.0 and 1.0 are exact.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mix {
    threshold: u64,
    all_reads: bool,
}

impl Mix {
    pub fn new(read_ratio: f64) -> Mix {
        let r = read_ratio.clamp(0.0, 1.0);
        Mix {
            threshold: (r * (1u64 << 53) as f64) as u64,
            all_reads: r >= 1.0,
        }
    }

    #[inline]
    pub fn is_read(&self, rng: &mut Rng) -> bool {
        self.all_reads || (rng.next_u64() >> 11) < self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_seed_dependent() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let xa: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn next_f64_is_in_unit_interval_with_mean_half() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        let mean = sum / n as f64;
        assert!((mean - 0.5).abs() < 0.005, "mean {mean}");
    }

    #[test]
    fn mix_ratios_match_requested_fraction() {
        for &ratio in &[0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
            let mix = Mix::new(ratio);
            let mut r = Rng::new(42);
            let n = 400_000;
            let reads = (0..n).filter(|_| mix.is_read(&mut r)).count();
            let got = reads as f64 / n as f64;
            // 5 standard deviations of a binomial proportion, plus exactness at the ends.
            let sd = (ratio * (1.0 - ratio) / n as f64).sqrt();
            assert!(
                (got - ratio).abs() <= 5.0 * sd + 1e-12,
                "ratio {ratio}: got {got}"
            );
            if ratio == 0.0 {
                assert_eq!(reads, 0);
            }
            if ratio == 1.0 {
                assert_eq!(reads, n);
            }
        }
    }

    #[test]
    fn uniform_keys_cover_the_range_evenly() {
        let n = 100u64;
        let mut d = KeyDist::new(DistKind::Uniform, n, 0.0, Pattern::default());
        let mut r = Rng::new(3);
        let draws = 500_000;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let k = d.sample(&mut r);
            assert!(k < n);
            counts[k as usize] += 1;
        }
        // Chi-square with 99 degrees of freedom: the 99.99th percentile is about 157.
        let expected = draws as f64 / n as f64;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 160.0, "chi2 {chi2}");
    }

    #[test]
    fn zipf_frequencies_match_the_pmf() {
        for &s in &[0.5, 0.8, 0.99, 1.0, 1.2] {
            let z = Zipf::new(1000, s);
            let mut r = Rng::new(11);
            let draws = 1_000_000;
            let mut counts = vec![0u64; 1001];
            for _ in 0..draws {
                let k = z.sample(&mut r);
                assert!((1..=1000).contains(&k));
                counts[k as usize] += 1;
            }
            for k in [1u64, 2, 3, 10, 100] {
                let p = z.pmf(k);
                let got = counts[k as usize] as f64 / draws as f64;
                let sd = (p * (1.0 - p) / draws as f64).sqrt();
                assert!(
                    (got - p).abs() < 5.0 * sd + 1e-4,
                    "s={s} k={k}: got {got}, want {p}"
                );
            }
            // Popularity falls with rank.
            assert!(counts[1] > counts[2] && counts[2] > counts[10] && counts[10] > counts[500]);
        }
    }

    #[test]
    fn zipf_with_zero_skew_is_uniform() {
        let z = Zipf::new(10, 0.0);
        let mut r = Rng::new(5);
        let mut counts = [0u64; 11];
        for _ in 0..200_000 {
            counts[z.sample(&mut r) as usize] += 1;
        }
        for c in &counts[1..] {
            assert!((*c as f64 - 20_000.0).abs() < 1_000.0, "{counts:?}");
        }
    }

    #[test]
    fn zipf_key_index_is_zero_based_and_in_range() {
        let mut d = KeyDist::new(DistKind::Zipf, 5, 0.99, Pattern::default());
        let mut r = Rng::new(9);
        let mut seen = [false; 5];
        for _ in 0..10_000 {
            let k = d.sample(&mut r);
            assert!(k < 5);
            seen[k as usize] = true;
        }
        assert!(seen.iter().all(|&b| b));
        // A single key is always that key.
        let mut one = KeyDist::new(DistKind::Zipf, 1, 0.99, Pattern::default());
        assert_eq!(one.sample(&mut r), 0);
    }

    #[test]
    fn scan_walks_every_key_in_order_between_zipf_requests() {
        let pattern = Pattern {
            share: 0.25,
            loop_keys: 0,
        };
        let mut d = KeyDist::new(DistKind::Scan, 1000, 0.99, pattern);
        let mut r = Rng::new(4);
        let keys: Vec<u64> = (0..40_000).map(|_| d.sample(&mut r)).collect();
        // The scan's keys are consecutive, so the stream holds long ascending runs through
        // the cold end, which Zipf alone almost never requests in a row.
        let cold_runs = keys
            .windows(2)
            .filter(|w| w[0] >= 900 && w[1] == w[0] + 1)
            .count();
        assert!(cold_runs > 100, "{cold_runs}");
        let hot = keys.iter().filter(|&&k| k == 0).count() as f64 / keys.len() as f64;
        assert!(hot > 0.05, "rank 0 share {hot}");
        assert!(keys.iter().all(|&k| k < 1000));
    }

    #[test]
    fn loop_cycles_through_the_coldest_keys() {
        let pattern = Pattern {
            share: 1.0,
            loop_keys: 30,
        };
        let mut d = KeyDist::new(DistKind::Loop, 100, 0.99, pattern);
        let mut r = Rng::new(4);
        let keys: Vec<u64> = (0..65).map(|_| d.sample(&mut r)).collect();
        let want: Vec<u64> = (0..65).map(|i| 70 + i % 30).collect();
        assert_eq!(keys, want);
        // The default loop is 15% of the keys and a quarter of the requests.
        let mut d = KeyDist::new(DistKind::Loop, 1000, 0.99, Pattern::default());
        let looped = (0..10_000)
            .map(|_| d.sample(&mut r))
            .filter(|&k| k >= 850)
            .count();
        assert!((2_000..3_500).contains(&looped), "{looped}");
        assert_eq!("loop".parse::<DistKind>(), Ok(DistKind::Loop));
        assert_eq!(DistKind::Scan.to_string(), "scan");
    }

    #[test]
    fn value_size_forms() {
        assert_eq!(
            "32".parse::<ValueSize>().unwrap(),
            ValueSize { min: 32, max: 32 }
        );
        assert_eq!(
            "1024+-500".parse::<ValueSize>().unwrap(),
            ValueSize {
                min: 524,
                max: 1524
            }
        );
        assert_eq!(
            "1024±500".parse::<ValueSize>().unwrap(),
            ValueSize {
                min: 524,
                max: 1524
            }
        );
        assert_eq!(
            "1k".parse::<ValueSize>().unwrap(),
            ValueSize {
                min: 1024,
                max: 1024
            }
        );
        assert_eq!(
            "10..20".parse::<ValueSize>().unwrap(),
            ValueSize { min: 10, max: 20 }
        );
        assert_eq!(
            "10-20".parse::<ValueSize>().unwrap(),
            ValueSize { min: 10, max: 20 }
        );
        assert!("20..10".parse::<ValueSize>().is_err());
        assert!("10+-20".parse::<ValueSize>().is_err());
        assert!("abc".parse::<ValueSize>().is_err());
    }

    #[test]
    fn value_sizes_stay_in_range_with_the_right_mean() {
        let vs: ValueSize = "1024+-500".parse().unwrap();
        let mut r = Rng::new(1);
        let n = 200_000;
        let (mut lo, mut hi, mut sum) = (usize::MAX, 0, 0usize);
        for _ in 0..n {
            let s = vs.sample(&mut r);
            lo = lo.min(s);
            hi = hi.max(s);
            sum += s;
        }
        assert_eq!((lo, hi), (524, 1524));
        let mean = sum as f64 / n as f64;
        assert!((mean - vs.mean()).abs() < 3.0, "mean {mean}");
        let fixed = ValueSize { min: 7, max: 7 };
        assert_eq!(fixed.sample(&mut r), 7);
    }
}
