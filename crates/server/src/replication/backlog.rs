//! The replication backlog: a ring holding the last `capacity` bytes of the replication
//! stream, addressed by stream offset (bytes since the stream began, as Redis counts
//! `master_repl_offset`). Replicas are fed from it, and a replica that reconnects continues
//! (`+CONTINUE`) from its offset when the ring still holds it.

/// The ring. Offsets are 0-based byte positions of the stream: it holds `[start, end)`.
pub struct Backlog {
    buf: Vec<u8>,
    capacity: usize,
    /// Stream offset of the byte after the last one appended.
    end: u64,
    /// Bytes held (at most `capacity`).
    len: usize,
}

/// The offset asked for is no longer (or not yet) in the ring.
#[derive(Debug, PartialEq, Eq)]
pub struct OutOfRange;

impl Backlog {
    /// An empty ring whose stream starts at `offset`.
    pub fn new(capacity: usize, offset: u64) -> Backlog {
        Backlog {
            buf: Vec::new(),
            capacity: capacity.max(1),
            end: offset,
            len: 0,
        }
    }

    /// The offset of the next byte appended (Redis's `master_repl_offset`).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The oldest offset still held.
    pub fn start(&self) -> u64 {
        self.end - self.len as u64
    }

    /// Bytes held (INFO `repl_backlog_histlen`).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes the ring holds allocated (none until first used).
    pub fn memory(&self) -> usize {
        self.buf.capacity()
    }

    /// Whether the ring's memory is taken (it is on first use).
    pub fn allocated(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Memory for a ring of `capacity` bytes, written once so that its pages are mapped now
    /// rather than by the first appends (a page fault every 4 kB on the write path).
    pub fn memory_for(capacity: usize) -> Vec<u8> {
        let mut buf = Vec::with_capacity(capacity.max(1));
        buf.resize(capacity.max(1), 1);
        buf
    }

    /// Takes `buf` (from [`memory_for`](Self::memory_for) its capacity) as the ring's memory,
    /// unless it has its own already.
    pub fn provide(&mut self, buf: Vec<u8>) {
        if self.buf.is_empty() && buf.len() == self.capacity {
            self.buf = buf;
        }
    }

    /// Appends stream bytes; the oldest go when the ring is full.
    pub fn append(&mut self, mut bytes: &[u8]) {
        if self.buf.is_empty() {
            // Taken on first use: a server that never has a replica holds no ring.
            self.buf = Self::memory_for(self.capacity);
        }
        if bytes.len() > self.capacity {
            let skip = bytes.len() - self.capacity;
            self.end += skip as u64;
            bytes = &bytes[skip..];
        }
        let cap = self.buf.len();
        let at = self.pos(self.end);
        let first = (cap - at).min(bytes.len());
        self.buf[at..at + first].copy_from_slice(&bytes[..first]);
        let rest = bytes.len() - first;
        if rest > 0 {
            // Only when the bytes wrap around: no `memcpy` call of nothing at every change.
            self.buf[..rest].copy_from_slice(&bytes[first..]);
        }
        self.end += bytes.len() as u64;
        self.len = (self.len + bytes.len()).min(cap);
    }

    /// Index of stream offset `offset` in `buf`.
    fn pos(&self, offset: u64) -> usize {
        if self.buf.is_empty() {
            0
        } else {
            (offset % self.buf.len() as u64) as usize
        }
    }

    fn copy_out(&self, from: u64, n: usize, out: &mut [u8]) {
        let cap = self.buf.len();
        let at = self.pos(from);
        let first = (cap - at).min(n);
        out[..first].copy_from_slice(&self.buf[at..at + first]);
        out[first..n].copy_from_slice(&self.buf[..n - first]);
    }

    /// Appends to `out` up to `max` bytes from offset `from`; returns how many.
    pub fn read(&self, from: u64, max: usize, out: &mut Vec<u8>) -> Result<usize, OutOfRange> {
        if from < self.start() || from > self.end {
            return Err(OutOfRange);
        }
        let n = ((self.end - from) as usize).min(max);
        let before = out.len();
        out.resize(before + n, 0);
        self.copy_out(from, n, &mut out[before..]);
        Ok(n)
    }

    /// The bytes from offset `from` to the end, as the ring holds them (in two parts when
    /// they wrap around).
    pub fn slices(&self, from: u64) -> Result<[&[u8]; 2], OutOfRange> {
        if from < self.start() || from > self.end {
            return Err(OutOfRange);
        }
        let n = (self.end - from) as usize;
        if n == 0 {
            return Ok([&[], &[]]);
        }
        let at = self.pos(from);
        let first = (self.buf.len() - at).min(n);
        Ok([&self.buf[at..at + first], &self.buf[..n - first]])
    }

    /// Changes the capacity (CONFIG SET repl-backlog-size), keeping the newest bytes that fit
    /// at their offsets.
    pub fn resize(&mut self, capacity: usize) {
        let capacity = capacity.max(1);
        if capacity == self.capacity {
            return;
        }
        let keep = self.len.min(capacity);
        let mut held = Vec::with_capacity(keep);
        let _ = self.read(self.end - keep as u64, keep, &mut held);
        *self = Backlog::new(capacity, self.end - keep as u64);
        if keep > 0 {
            self.append(&held);
        }
    }

    /// Drops what is held and starts the stream over at `offset` (nobody can continue from
    /// before it). A new capacity takes effect here.
    pub fn reset(&mut self, offset: u64, capacity: usize) {
        *self = Backlog::new(capacity, offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model: the whole stream kept.
    fn check(b: &Backlog, stream: &[u8], base: u64) {
        assert_eq!(b.end(), base + stream.len() as u64);
        let held = stream.len().min(b.capacity());
        assert_eq!(b.len(), held);
        let start = b.end() - held as u64;
        for from in start..=b.end() {
            let mut out = Vec::new();
            let n = b.read(from, usize::MAX, &mut out).expect("in range");
            assert_eq!(n as u64, b.end() - from);
            assert_eq!(&out[..], &stream[(from - base) as usize..]);
            let [a, b2] = b.slices(from).expect("in range");
            assert_eq!([a, b2].concat(), out);
        }
        if start > 0 {
            assert_eq!(b.read(start - 1, 10, &mut Vec::new()), Err(OutOfRange));
        }
        assert_eq!(b.read(b.end() + 1, 10, &mut Vec::new()), Err(OutOfRange));
        assert_eq!(b.slices(b.end() + 1), Err(OutOfRange));
    }

    #[test]
    fn the_ring_keeps_the_last_capacity_bytes_at_their_offsets() {
        let mut state = 7u64;
        for capacity in [1usize, 5, 16, 100] {
            for base in [0u64, 3, 1000] {
                let mut b = Backlog::new(capacity, base);
                let mut stream = Vec::new();
                for step in 0..60 {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let n = (state >> 59) as usize + (step % 3) * 20 % (capacity * 2 + 1);
                    let chunk: Vec<u8> = (0..n).map(|i| (stream.len() + i) as u8).collect();
                    b.append(&chunk);
                    stream.extend_from_slice(&chunk);
                    check(&b, &stream, base);
                }
            }
        }
    }

    #[test]
    fn a_resize_keeps_the_newest_bytes_at_their_offsets() {
        let stream: Vec<u8> = (0..100u8).collect();
        let mut b = Backlog::new(16, 5);
        b.append(&stream[..40]);
        b.resize(8);
        check(&b, &stream[..40], 5);
        b.append(&stream[40..50]);
        check(&b, &stream[..50], 5);
        b.resize(32);
        assert_eq!(b.len(), 8);
        b.append(&stream[50..]);
        check(&b, &stream, 5);
        let mut unused = Backlog::new(16, 0);
        unused.resize(64);
        assert_eq!((unused.capacity(), unused.memory()), (64, 0));
    }

    #[test]
    fn a_reset_starts_over_at_an_offset() {
        let mut b = Backlog::new(8, 0);
        b.append(b"abcdefghij");
        assert_eq!(b.start(), 2);
        b.reset(10, 4);
        assert_eq!((b.start(), b.end(), b.len()), (10, 10, 0));
        assert_eq!(b.read(2, 10, &mut Vec::new()), Err(OutOfRange));
        b.append(b"xyz");
        let mut out = Vec::new();
        assert_eq!(b.read(11, 10, &mut out), Ok(2));
        assert_eq!(out, b"yz");
    }
}
