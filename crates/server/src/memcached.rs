//! memcached text and meta protocol front end (stub while being written).

use std::sync::Arc;

use crate::clients::ClientInfo;
use crate::shared::Shared;

#[derive(Default)]
pub struct McState {}

impl McState {
    /// Handles complete requests in `input`; returns (consumed, close, commands run).
    pub fn process(&mut self, _shared: &Shared, _client: &Arc<ClientInfo>, input: &[u8], out: &mut Vec<u8>) -> (usize, bool, u64) {
        let mut consumed = 0;
        while let Some(pos) = input[consumed..].iter().position(|&b| b == b'\n') {
            consumed += pos + 1;
            out.extend_from_slice(b"ERROR\r\n");
        }
        (consumed, false, 0)
    }
}
