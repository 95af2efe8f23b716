//! A request's arguments as ranges of one buffer, so that parsing allocates nothing.

use std::ops::Range;

#[derive(Clone, Copy)]
pub struct Args<'a> {
    buf: &'a [u8],
    ranges: &'a [Range<usize>],
}

impl<'a> Args<'a> {
    pub fn new(buf: &'a [u8], ranges: &'a [Range<usize>]) -> Args<'a> {
        Args { buf, ranges }
    }
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    pub fn get(&self, i: usize) -> &'a [u8] {
        &self.buf[self.ranges[i].clone()]
    }
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.ranges.iter().map(|r| &self.buf[r.clone()])
    }
    /// The arguments in `range` (a script's KEYS and ARGV).
    pub fn slice(&self, range: Range<usize>) -> Args<'a> {
        Args {
            buf: self.buf,
            ranges: &self.ranges[range],
        }
    }
    /// Arguments from `from` on.
    pub fn tail(&self, from: usize) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.ranges[from.min(self.ranges.len())..]
            .iter()
            .map(|r| &self.buf[r.clone()])
    }
}

/// An owned copy of a request, for commands queued by MULTI.
pub struct OwnedArgs {
    pub buf: Vec<u8>,
    pub ranges: Vec<Range<usize>>,
}

impl OwnedArgs {
    pub fn copy(args: &Args<'_>) -> OwnedArgs {
        let mut buf = Vec::new();
        let mut ranges = Vec::with_capacity(args.len());
        for a in args.iter() {
            ranges.push(buf.len()..buf.len() + a.len());
            buf.extend_from_slice(a);
        }
        OwnedArgs { buf, ranges }
    }
    pub fn args(&self) -> Args<'_> {
        Args::new(&self.buf, &self.ranges)
    }
}
