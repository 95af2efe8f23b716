//! Per-thread pool of connection buffers: a busy connection cycles the same few buffers, and an
//! idle one holds none.

/// Initial (and pooled) input buffer size.
pub const IN_BUF: usize = 16 * 1024;
/// Initial capacity of an output buffer.
const OUT_BUF: usize = 16 * 1024;
/// Output buffers up to this capacity are pooled; bigger ones are freed (shrunk) when drained.
const OUT_POOL_MAX_CAP: usize = 256 * 1024;
/// Buffers of each kind a thread keeps for reuse.
const POOL_MAX: usize = 64;

/// Per-thread buffer pool.
#[derive(Default)]
pub struct BufPool {
    ins: Vec<Vec<u8>>,
    outs: Vec<Vec<u8>>,
}

impl BufPool {
    pub fn take_in(&mut self) -> Vec<u8> {
        self.ins.pop().unwrap_or_else(|| vec![0; IN_BUF])
    }

    pub fn put_in(&mut self, b: Vec<u8>) {
        // Grown buffers are dropped: that is how a big idle buffer shrinks.
        if b.len() == IN_BUF && self.ins.len() < POOL_MAX {
            self.ins.push(b);
        }
    }

    pub fn take_out(&mut self) -> Vec<u8> {
        self.outs
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(OUT_BUF))
    }

    pub fn put_out(&mut self, mut b: Vec<u8>) {
        if b.capacity() >= OUT_BUF && b.capacity() <= OUT_POOL_MAX_CAP && self.outs.len() < POOL_MAX
        {
            b.clear();
            self.outs.push(b);
        }
    }
}
