//! The side that serves replicas (a primary, or a replica serving its own replicas): PSYNC
//! decides between a partial resync (`+CONTINUE`, from the backlog) and a full one
//! (`+FULLRESYNC`, a snapshot streamed as it is written, then the stream from the offset it
//! was noted at). A thread per replica sends the snapshot, then catches the replica up from
//! the backlog as fast as its connection drains (bounded: it waits while more than
//! `MAX_PENDING` bytes are unsent) and hands it to the live set (`Feed::live`), which the
//! appending threads send to directly, once per event-loop turn; it takes over again if the
//! stream outruns the connection.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::clients::{client_flags, ClientInfo};

use super::{random_id, ReplicaInfo, Replication, MAX_PENDING};
/// Bytes a sender posts at once.
const CHUNK: usize = 256 << 10;
/// Bytes a full sync posts at once, and the unsent bytes it lets the replica's connection
/// hold before posting more. The connection's event loop writes everything pending in one
/// call, and on loopback that call also runs the replica's receive: 16 MiB pending made
/// turns of milliseconds for the other clients of that loop.
const SYNC_CHUNK: usize = 128 << 10;
const SYNC_PENDING: usize = 512 << 10;
/// How often a full sync looks whether its connection has room again.
const SYNC_PAUSE: Duration = Duration::from_micros(200);

/// Why PSYNC was refused.
#[derive(Debug)]
pub enum PsyncError {
    /// A replica that has no data from its own primary yet cannot serve a replica.
    NoMasterLink,
}

impl PsyncError {
    pub fn message(&self) -> &'static str {
        match self {
            PsyncError::NoMasterLink => {
                "NOMASTERLINK Can't SYNC while not connected with my master"
            }
        }
    }
}

impl Replication {
    /// PSYNC `replid` `offset` from `client`: the connection becomes a replica's, fed from
    /// here on by a thread of its own (which posts the `+FULLRESYNC` / `+CONTINUE` line first).
    /// `offset` is Redis's: the replica's offset plus one (-1 with `?`: a full sync).
    pub fn psync(
        self: &Arc<Self>,
        client: Arc<ClientInfo>,
        replid: &[u8],
        offset: i64,
    ) -> Result<(), PsyncError> {
        if self.is_replica() && self.persistence.repl_mark.lock().is_none() {
            return Err(PsyncError::NoMasterLink);
        }
        let announced = {
            let mut announced = self.announced.lock();
            let found = announced.iter().position(|a| a.client == client.id);
            found.map(|i| announced.remove(i))
        };
        let port = announced.as_ref().map_or(0, |a| a.port);
        let from = offset - 1;
        let partial = from >= 0 && {
            let ids = self.ids.lock();
            let mut feed = self.backlog.lock();
            self.apply_backlog_size(&mut feed);
            let b = &feed.ring;
            let from = from as u64;
            let known = replid == ids.replid.as_bytes()
                || (replid == ids.replid2.as_bytes() && offset <= ids.second_offset);
            let fed = self.feeding() || self.is_replica();
            known && fed && from >= b.start() && from <= b.end()
        };
        if !partial && replid != b"?" {
            self.sync_partial_err.fetch_add(1, Relaxed);
        }
        let ip = match announced.and_then(|a| a.ip) {
            Some(ip) => ip,
            None => client
                .addr
                .rsplit_once(':')
                .map_or(client.addr.as_str(), |(ip, _)| ip)
                .to_string(),
        };
        let info = Arc::new(ReplicaInfo {
            client: client.clone(),
            ip,
            port: AtomicU64::new(port as u64),
            state: AtomicU8::new(0),
            ack_offset: AtomicU64::new(0),
            ack_ms: AtomicU64::new(self.now_ms()),
            live: AtomicBool::new(false),
            resume_at: AtomicU64::new(0),
        });
        client.state.flags.fetch_or(client_flags::REPLICA, Relaxed);
        self.replicas.lock().push(info.clone());
        let this = Arc::clone(self);
        let start = partial.then_some(from as u64);
        let spawned = std::thread::Builder::new()
            .name("cairn-repl-sender".into())
            .spawn(move || {
                this.serve(&info, start);
                this.replicas.lock().retain(|r| !Arc::ptr_eq(r, &info));
                info.client.kill();
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start a replica's sender: {e}");
            client.kill();
        }
        Ok(())
    }

    fn serve(self: &Arc<Self>, info: &Arc<ReplicaInfo>, partial_from: Option<u64>) {
        self.catch_up(info, partial_from);
        let mut feed = self.backlog.lock();
        feed.live.retain(|r| !Arc::ptr_eq(&r.info, info));
        info.live.store(false, Relaxed);
    }

    fn catch_up(self: &Arc<Self>, info: &Arc<ReplicaInfo>, partial_from: Option<u64>) {
        let client = &info.client;
        let start = match partial_from {
            Some(from) => {
                client.post_stream(format!("+CONTINUE {}\r\n", self.replid()).as_bytes());
                self.sync_partial_ok.fetch_add(1, Relaxed);
                from
            }
            None => match self.full_sync(info) {
                Ok(offset) => offset,
                Err(e) => {
                    tracing::warn!(replica = %client.addr, "full sync failed: {e}");
                    return;
                }
            },
        };
        info.state.store(2, Relaxed);
        info.ack_ms.store(self.now_ms(), Relaxed);
        tracing::info!(replica = %client.addr, offset = start, "replica online");
        let mut pos = start;
        let mut buf = Vec::with_capacity(CHUNK);
        while !client.closed() && !client.killed() {
            buf.clear();
            {
                let mut feed = self.backlog.lock();
                if info.live.load(Relaxed) {
                    // The stream posts to it; wake when it outran the connection (or to
                    // see the connection closed).
                    self.grown.wait_for(&mut feed, Duration::from_millis(100));
                    if !info.live.load(Relaxed) {
                        pos = info.resume_at.load(Relaxed);
                    }
                    continue;
                }
                match feed.ring.read(pos, CHUNK, &mut buf) {
                    Err(_) => {
                        tracing::warn!(replica = %client.addr, "replica fell out of the backlog");
                        return;
                    }
                    Ok(0) => {
                        // Caught up: from the next append on the stream sends to it.
                        info.live.store(true, Relaxed);
                        feed.live.push(super::Live {
                            info: Arc::clone(info),
                            sent: pos,
                        });
                        continue;
                    }
                    Ok(_) => {}
                }
            }
            client.post_stream(&buf);
            pos += buf.len() as u64;
            if wait_for_room(client).is_err() {
                return;
            }
        }
    }

    /// Sends `+FULLRESYNC`, the snapshot and its end mark; returns the offset the stream
    /// continues from. On a primary the snapshot's META cut tells the replica which of the
    /// stream's first records it already holds; on a replica the snapshot is taken between
    /// two applied records (its link waits) and matches the offset exactly.
    fn full_sync(self: &Arc<Self>, info: &ReplicaInfo) -> io::Result<u64> {
        self.sync_full.fetch_add(1, Relaxed);
        info.state.store(1, Relaxed);
        let client = &info.client;
        let mark = random_id();
        let mut writer = MailWriter {
            client,
            buf: Vec::with_capacity(SYNC_CHUNK),
        };
        let offset = if self.is_replica() {
            let held = self.persistence.repl_mark.lock();
            let Some((replid, offset)) = held.clone() else {
                return Err(io::Error::other("no data from the primary yet"));
            };
            writer.write_all(
                format!("+FULLRESYNC {replid} {offset}\r\n$EOF:{mark}\r\n").as_bytes(),
            )?;
            let (w, _) = self
                .persistence
                .stream_snapshot(writer, Some(&(replid, offset)))?;
            writer = w;
            offset
        } else {
            self.start_stream();
            let (replid, offset) = (self.replid(), self.offset());
            writer.write_all(
                format!("+FULLRESYNC {replid} {offset}\r\n$EOF:{mark}\r\n").as_bytes(),
            )?;
            let started = std::time::Instant::now();
            let (w, report) = self.persistence.stream_snapshot(writer, None)?;
            tracing::info!(
                replica = %client.addr,
                "full sync: {} keys, {} bytes sent in {:?} (longest shard lock {:?})",
                report.records,
                report.file_bytes,
                started.elapsed(),
                report.longest_hold
            );
            writer = w;
            offset
        };
        writer.write_all(mark.as_bytes())?;
        writer.flush()?;
        Ok(offset)
    }
}

/// Waits while the replica's connection has more than `MAX_PENDING` bytes unsent.
fn wait_for_room(client: &ClientInfo) -> io::Result<()> {
    wait_for_room_below(client, MAX_PENDING, Duration::from_millis(1))
}

/// Waits while the connection has more than `most` bytes unsent, looking every `pause`.
fn wait_for_room_below(client: &ClientInfo, most: usize, pause: Duration) -> io::Result<()> {
    while client.pending_output() > most {
        if client.closed() || client.killed() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        std::thread::sleep(pause);
    }
    if client.closed() || client.killed() {
        return Err(io::ErrorKind::BrokenPipe.into());
    }
    Ok(())
}

/// Writes into a replica's connection through its mailbox, in chunks of `SYNC_CHUNK` bytes,
/// waiting until it holds at most `SYNC_PENDING` unsent bytes before each.
struct MailWriter<'a> {
    client: &'a ClientInfo,
    buf: Vec<u8>,
}

impl Write for MailWriter<'_> {
    /// Takes at most what fills the chunk (a shard's block is megabytes: `write_all` comes
    /// back for the rest), so that no post is larger than a chunk.
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len() >= SYNC_CHUNK {
            self.flush()?;
        }
        let take = bytes.len().min(SYNC_CHUNK - self.buf.len());
        self.buf.extend_from_slice(&bytes[..take]);
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            wait_for_room_below(self.client, SYNC_PENDING, SYNC_PAUSE)?;
            self.client.post_stream(&self.buf);
            self.buf.clear();
        }
        Ok(())
    }
}
