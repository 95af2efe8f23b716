//! Publish/subscribe: the channel and pattern registry, and message delivery through each
//! subscriber's mailbox (so a PUBLISH never writes to another connection's socket itself).

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use parking_lot::RwLock;
use resp::reply::{self, Version};

use crate::clients::ClientInfo;

type Subscribers = Vec<Arc<ClientInfo>>;

#[derive(Default)]
pub struct PubSub {
    channels: RwLock<HashMap<Vec<u8>, Subscribers>>,
    patterns: RwLock<Vec<(Vec<u8>, Arc<ClientInfo>)>>,
    /// Messages published, and copies of them delivered to subscribers (the metrics endpoint).
    pub published: std::sync::atomic::AtomicU64,
    pub delivered: std::sync::atomic::AtomicU64,
}

/// The RESP version a client speaks now (HELLO may change it).
pub fn version_of(client: &ClientInfo) -> Version {
    if client.resp_version.load(Relaxed) == 3 {
        Version::Resp3
    } else {
        Version::Resp2
    }
}

impl PubSub {
    /// Subscribes; returns false if it already was.
    pub fn subscribe(&self, channel: &[u8], client: &Arc<ClientInfo>) -> bool {
        let mut channels = self.channels.write();
        let subs = channels.entry(channel.to_vec()).or_default();
        if subs.iter().any(|c| c.id == client.id) {
            return false;
        }
        subs.push(client.clone());
        true
    }

    pub fn unsubscribe(&self, channel: &[u8], client_id: u64) -> bool {
        let mut channels = self.channels.write();
        let Some(subs) = channels.get_mut(channel) else {
            return false;
        };
        let before = subs.len();
        subs.retain(|c| c.id != client_id);
        let removed = subs.len() != before;
        if subs.is_empty() {
            channels.remove(channel);
        }
        removed
    }

    pub fn psubscribe(&self, pattern: &[u8], client: &Arc<ClientInfo>) -> bool {
        let mut patterns = self.patterns.write();
        if patterns
            .iter()
            .any(|(p, c)| p == pattern && c.id == client.id)
        {
            return false;
        }
        patterns.push((pattern.to_vec(), client.clone()));
        true
    }

    pub fn punsubscribe(&self, pattern: &[u8], client_id: u64) -> bool {
        let mut patterns = self.patterns.write();
        let before = patterns.len();
        patterns.retain(|(p, c)| !(p == pattern && c.id == client_id));
        patterns.len() != before
    }

    /// Delivers `message` to every subscriber of `channel` and every matching pattern.
    /// Returns how many clients received it.
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> usize {
        let mut receivers = 0;
        let mut buf = Vec::new();
        if let Some(subs) = self.channels.read().get(channel) {
            for client in subs {
                buf.clear();
                reply::push_len(&mut buf, 3, version_of(client));
                reply::bulk(&mut buf, b"message");
                reply::bulk(&mut buf, channel);
                reply::bulk(&mut buf, message);
                client.post(&buf, false);
                receivers += 1;
            }
        }
        for (pattern, client) in self.patterns.read().iter() {
            if store::glob::matches(pattern, channel) {
                buf.clear();
                reply::push_len(&mut buf, 4, version_of(client));
                reply::bulk(&mut buf, b"pmessage");
                reply::bulk(&mut buf, pattern);
                reply::bulk(&mut buf, channel);
                reply::bulk(&mut buf, message);
                client.post(&buf, false);
                receivers += 1;
            }
        }
        self.published.fetch_add(1, Relaxed);
        self.delivered.fetch_add(receivers as u64, Relaxed);
        receivers
    }

    /// Active channels, optionally matching a glob pattern.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        self.channels
            .read()
            .keys()
            .filter(|c| pattern.is_none_or(|p| store::glob::matches(p, c)))
            .cloned()
            .collect()
    }

    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.channels.read().get(channel).map_or(0, Vec::len)
    }

    /// Distinct patterns subscribed to (by anyone).
    pub fn numpat(&self) -> usize {
        let patterns = self.patterns.read();
        let mut distinct: Vec<&[u8]> = patterns.iter().map(|(p, _)| p.as_slice()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        distinct.len()
    }
}
