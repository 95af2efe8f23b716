//! The replica's side of replication: one thread per link to a primary. It does Redis's
//! handshake (PING, AUTH, REPLCONF listening-port / capa, PSYNC), receives a full sync (the
//! primary's snapshot, streamed between `$EOF:<mark>` and the mark, written to a temporary
//! file and loaded as a snapshot is at start) or continues (`+CONTINUE`), then applies the
//! stream: every command through `command::call` with `Caller::Replication` (the one command
//! path: tracking, statistics and MONITOR see them), forwards the same bytes to its own
//! replicas (`Replication::forward`), and acknowledges its offset every second and when asked
//! (REPLCONF GETACK). A dropped link is retried every second with PSYNC from its offset.
//!
//! The link holds the persistence's replication mark while it applies a batch, so that a
//! save (and a sub-replica's full sync) on this replica falls between two applied records.

use std::io::{self, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use resp::request::{parse_request, ArgSource, Limits, Parsed};

use crate::clients::{client_flags, ClientInfo};
use crate::command::{call, lookup, Args, Caller, Conn, Resp};
use crate::protocol::Protocol;
use crate::replication::encode;
use crate::replication::sync_cut::SyncCut;
use crate::shared::Shared;

/// REPLICAOF's way to start a link (`replication::LinkStarter`).
pub struct Starter(pub Weak<Shared>);

impl crate::replication::LinkStarter for Starter {
    fn start(&self, generation: u64, host: String, port: u16) {
        let weak = self.0.clone();
        let spawned = std::thread::Builder::new()
            .name("cairn-repl-link".into())
            .spawn(move || run(weak, generation, host, port));
        if let Err(e) = spawned {
            tracing::error!("cannot start the replication link: {e}");
        }
    }
}

/// At start: installs the link starter and, with `--replicaof`, becomes a replica (after the
/// snapshot loaded, whose replication mark lets the link continue where it was).
pub fn start(shared: &Arc<Shared>) {
    let repl = &shared.replication;
    repl.set_link_starter(Arc::new(Starter(Arc::downgrade(shared))));
    let Some((host, port)) = shared.config.repl.replicaof.clone() else {
        return;
    };
    if let Some((id, offset)) = shared.persistence.loaded_repl_mark.lock().clone() {
        let mut mark = shared.persistence.repl_mark.lock();
        repl.synced(&id, offset);
        *mark = Some((id, offset));
    }
    repl.replicaof(host, port);
}

fn run(weak: Weak<Shared>, generation: u64, host: String, port: u16) {
    // The cut of the snapshot this replica was last loaded from: the stream records it
    // already holds.
    let mut cut = SyncCut::none();
    loop {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        let repl = &shared.replication;
        if repl.generation() != generation {
            return;
        }
        match session(&shared, generation, &host, port, &mut cut) {
            Ok(()) => return,
            Err(e) => {
                repl.link_up.store(false, Relaxed);
                repl.sync_in_progress.store(false, Relaxed);
                tracing::warn!("replication link to {host}:{port}: {e}");
            }
        }
        drop(shared);
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(100));
            match weak.upgrade() {
                Some(s) if s.replication.generation() == generation => {}
                _ => return,
            }
        }
    }
}

/// The connection to the primary, with what was read and not used yet.
struct Link {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Counts what is read (INFO `total_net_repl_input_bytes`).
    repl: Arc<crate::replication::Replication>,
}

impl Link {
    fn send(&mut self, args: &[&[u8]]) -> io::Result<()> {
        let mut out = Vec::new();
        encode::encode_command(args, &mut out);
        self.stream.write_all(&out)
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 64 * 1024];
        // A signal (SIGSTOP/SIGCONT of this process, a debugger) interrupts a read: retried.
        let mut read = self.stream.read(&mut chunk);
        while matches!(&read, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
            read = self.stream.read(&mut chunk);
        }
        match read {
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the primary closed the link",
            )),
            Ok(n) => {
                self.repl.received_bytes.fetch_add(n as u64, Relaxed);
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e) => Err(e),
        }
    }

    /// One reply line, without its CRLF.
    fn line(&mut self) -> io::Result<String> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end + 2);
                return Ok(line);
            }
            if self.buf.len() > 64 * 1024 {
                return Err(io::Error::other("reply line too long"));
            }
            self.fill()?;
        }
    }

    fn expect_ok(&mut self, what: &str) -> io::Result<()> {
        let line = self.line()?;
        if line.starts_with('-') {
            return Err(io::Error::other(format!("{what}: {line}")));
        }
        Ok(())
    }

    /// Copies exactly `n` bytes to `out`.
    fn copy(&mut self, mut n: usize, out: &mut impl Write) -> io::Result<()> {
        while n > 0 {
            if self.buf.is_empty() {
                self.fill()?;
            }
            let take = n.min(self.buf.len());
            out.write_all(&self.buf[..take])?;
            self.buf.drain(..take);
            n -= take;
        }
        Ok(())
    }

    fn exact(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut v = Vec::with_capacity(n);
        self.copy(n, &mut v)?;
        Ok(v)
    }
}

fn session(
    shared: &Arc<Shared>,
    generation: u64,
    host: &str,
    port: u16,
    cut: &mut SyncCut,
) -> io::Result<()> {
    let repl = &shared.replication;
    let config = repl.config.read().clone();
    let timeout = Duration::from_secs(config.repl_timeout.max(1));
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other("no address"))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    let mut link = Link {
        stream,
        buf: Vec::new(),
        repl: Arc::clone(repl),
    };
    link.send(&[b"PING"])?;
    let pong = link.line()?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") {
        return Err(io::Error::other(format!("PING: {pong}")));
    }
    if let Some(pass) = &config.masterauth {
        match &config.masteruser {
            Some(user) => link.send(&[b"AUTH", user.as_bytes(), pass.as_bytes()])?,
            None => link.send(&[b"AUTH", pass.as_bytes()])?,
        }
        link.expect_ok("AUTH")?;
    }
    let my_port = match config.replica_announce_port {
        0 => shared.config.port.to_string(),
        announced => announced.to_string(),
    };
    link.send(&[b"REPLCONF", b"listening-port", my_port.as_bytes()])?;
    link.expect_ok("REPLCONF listening-port")?;
    if let Some(ip) = &config.replica_announce_ip {
        link.send(&[b"REPLCONF", b"ip-address", ip.as_bytes()])?;
        link.expect_ok("REPLCONF ip-address")?;
    }
    link.send(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
    link.expect_ok("REPLCONF capa")?;
    let mark = shared.persistence.repl_mark.lock().clone();
    let (id, next) = match &mark {
        Some((id, offset)) => (id.clone(), (offset + 1).to_string()),
        None => ("?".to_string(), "-1".to_string()),
    };
    link.send(&[b"PSYNC", id.as_bytes(), next.as_bytes()])?;
    let answer = link.line()?;
    let mut words = answer.split_whitespace();
    match words.next() {
        Some("+FULLRESYNC") => {
            let replid = words.next().unwrap_or_default().to_string();
            let offset: u64 = words
                .next()
                .and_then(|o| o.parse().ok())
                .ok_or_else(|| io::Error::other(format!("bad reply {answer}")))?;
            *cut = full_sync(shared, &mut link, &replid, offset)?;
        }
        Some("+CONTINUE") => {
            if let Some(new_id) = words.next() {
                let mut mark = shared.persistence.repl_mark.lock();
                repl.continued(new_id);
                if let Some((id, _)) = mark.as_mut() {
                    *id = new_id.to_string();
                }
            }
            tracing::info!("partial resync with the primary {host}:{port} accepted");
        }
        _ => return Err(io::Error::other(format!("PSYNC: {answer}"))),
    }
    stream_loop(shared, generation, link, host, port, cut, timeout)
}

/// Receives the snapshot into a temporary file and loads it in place of the data; returns
/// the cut to skip stream records by (none when the snapshot matches the offset exactly).
fn full_sync(
    shared: &Arc<Shared>,
    link: &mut Link,
    replid: &str,
    offset: u64,
) -> io::Result<SyncCut> {
    let repl = &shared.replication;
    repl.sync_in_progress.store(true, Relaxed);
    let eof = link.line()?;
    let Some(mark) = eof.strip_prefix("$EOF:").map(str::to_string) else {
        return Err(io::Error::other(format!("expected $EOF:<mark>, got {eof}")));
    };
    let (target, _) = shared.snapshot_target();
    let tmp = target
        .dir
        .join(format!("temp-repl-{}.cairn", std::process::id()));
    let received = receive_snapshot(link, &tmp, mark.as_bytes());
    let result = received.and_then(|()| {
        tracing::info!("full sync from the primary: loading {offset} ({replid})");
        let mut held = shared.persistence.repl_mark.lock();
        shared.store.flush_by(store::Author::SERVER);
        let threads = crate::command::persist_cmd::load_threads();
        let report = std::thread::scope(|s| {
            s.spawn(|| {
                below_normal_priority();
                shared
                    .persistence
                    .load(&tmp, crate::snapshot::Damaged::Refuse, threads, 0)
            })
            .join()
        })
        .map_err(|_| io::Error::other("the full sync's load panicked"))?
        .map_err(io::Error::other)?;
        repl.synced(replid, offset);
        *held = Some((replid.to_string(), offset));
        Ok(match report.repl {
            Some(_) => SyncCut::none(),
            None => SyncCut::loaded(report.cut, report.sql_position.unwrap_or(0), report.parts),
        })
    });
    let _ = std::fs::remove_file(&tmp);
    repl.sync_in_progress.store(false, Relaxed);
    result
}

/// Lowers the calling thread's priority to nice 10, which the threads it starts inherit: a
/// full sync's load runs there. The replica serves no one meanwhile (`-LOADING`), and the
/// load's threads take every core they are given; on cores shared with latency-sensitive
/// work (its primary, other servers) they yield to it at once instead of after their time
/// slice (issue 14: the primary's p99 while a co-located replica loaded). No lock another
/// thread waits for is held by them: clients get `-LOADING`, the link itself waits for the
/// load. Best effort: elsewhere than Linux (per-thread nice values) it keeps its priority.
fn below_normal_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority with PRIO_PROCESS and who = 0 changes only the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// The snapshot file's header and frames (docs/snapshot-format.md), copied as they come.
fn receive_snapshot(link: &mut Link, tmp: &std::path::Path, mark: &[u8]) -> io::Result<()> {
    let mut file = BufWriter::with_capacity(1 << 20, std::fs::File::create(tmp)?);
    let header = link.exact(32)?;
    if &header[..8] != b"CAIRNSNP" {
        return Err(io::Error::other("the full sync is not a cairn snapshot"));
    }
    let header_len = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes")) as usize;
    file.write_all(&header)?;
    if header_len > 32 {
        link.copy(header_len - 32, &mut file)?;
    }
    loop {
        let frame = link.exact(24)?;
        file.write_all(&frame)?;
        let stored = u32::from_le_bytes(frame[8..12].try_into().expect("4 bytes")) as usize;
        if frame[0] == 0xFF {
            break;
        }
        link.copy(stored, &mut file)?;
    }
    link.copy(4, &mut file)?;
    file.flush()?;
    if link.exact(mark.len())? != mark {
        return Err(io::Error::other("the full sync's end mark does not match"));
    }
    Ok(())
}

/// Unregisters the link's client when the session ends.
struct Registered<'a>(&'a Shared, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.clients.unregister(self.1);
    }
}

fn stream_loop(
    shared: &Arc<Shared>,
    generation: u64,
    mut link: Link,
    host: &str,
    port: u16,
    cut: &mut SyncCut,
    timeout: Duration,
) -> io::Result<()> {
    let repl = &shared.replication;
    let laddr = link
        .stream
        .local_addr()
        .map_or_else(|_| "?:0".to_string(), |a| a.to_string());
    let id = shared.clients.next_id();
    let client = Arc::new(ClientInfo::new(
        id,
        format!("{host}:{port}"),
        laddr,
        -1,
        Protocol::Resp,
        None,
    ));
    client.state.flags.fetch_or(client_flags::MASTER, Relaxed);
    shared.clients.register(client.clone());
    let _registered = Registered(shared, id);
    let mut conn = Conn::new(client.clone(), true);
    link.stream
        .set_read_timeout(Some(Duration::from_millis(100)))?;
    repl.link_up.store(true, Relaxed);
    repl.last_io_ms.store(repl.now_ms(), Relaxed);
    let limits = Limits::default();
    let (mut ranges, mut scratch, mut out) = (Vec::new(), Vec::new(), Vec::new());
    let mut last_ack = Instant::now() - Duration::from_secs(2);
    let mut last_data = Instant::now();
    loop {
        if repl.generation() != generation {
            return Ok(());
        }
        if client.killed() {
            return Err(io::Error::other("link killed (CLIENT KILL)"));
        }
        match link.fill() {
            Ok(_) => {
                last_data = Instant::now();
                repl.last_io_ms.store(repl.now_ms(), Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if last_data.elapsed() > timeout {
                    return Err(io::Error::other("timeout: no data from the primary"));
                }
            }
            Err(e) => return Err(e),
        }
        let mut getack = false;
        if !link.buf.is_empty() {
            let mut mark = shared.persistence.repl_mark.lock();
            let mut consumed = 0;
            loop {
                let rest = &link.buf[consumed..];
                match parse_request(rest, &limits, &mut ranges, &mut scratch) {
                    Ok((Parsed::Complete(n), source)) => {
                        if source == ArgSource::Buffer {
                            let args = Args::new(rest, &ranges);
                            getack |= apply(shared, &mut conn, args, cut, &mut out);
                        }
                        consumed += n;
                    }
                    Ok(_) => break,
                    Err(e) => {
                        return Err(io::Error::other(format!(
                            "protocol error from the primary: {e:?}"
                        )))
                    }
                }
            }
            if consumed > 0 {
                if let Some((_, offset)) = mark.as_mut() {
                    *offset += consumed as u64;
                }
                repl.forward(&link.buf[..consumed]);
                link.buf.drain(..consumed);
            }
            drop(mark);
        }
        if getack || last_ack.elapsed() >= Duration::from_secs(1) {
            let offset = shared
                .persistence
                .repl_mark
                .lock()
                .as_ref()
                .map_or(0, |m| m.1);
            link.send(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()])?;
            last_ack = Instant::now();
        }
    }
}

/// Applies one stream command; returns whether the primary asked for an acknowledgement.
fn apply(
    shared: &Shared,
    conn: &mut Conn,
    args: Args<'_>,
    cut: &mut SyncCut,
    out: &mut Vec<u8>,
) -> bool {
    let name = args.get(0);
    if name.eq_ignore_ascii_case(b"ping") {
        return false;
    }
    if name.eq_ignore_ascii_case(b"replconf") {
        return args.len() > 1 && args.get(1).eq_ignore_ascii_case(b"getack");
    }
    let argv: Vec<&[u8]> = args.iter().collect();
    if cut.skip(&encode::place(&argv)) {
        return false;
    }
    if name.eq_ignore_ascii_case(b"repl.sql") && args.len() == 4 {
        // The command that replays the SQL change, RESP-encoded.
        let inner = args.get(3);
        let (mut ranges, mut scratch) = (Vec::new(), Vec::new());
        if let Ok((Parsed::Complete(_), ArgSource::Buffer)) =
            parse_request(inner, &Limits::default(), &mut ranges, &mut scratch)
        {
            run_command(shared, conn, Args::new(inner, &ranges), out);
        }
        return false;
    }
    run_command(shared, conn, args, out);
    false
}

/// Runs one command through the command path as the replication stream's; waits for a
/// deferred reply (SQL statements run on the SQL engine's thread, in order).
fn run_command(shared: &Shared, conn: &mut Conn, args: Args<'_>, out: &mut Vec<u8>) {
    out.clear();
    let Some(command) = lookup(args.get(0)) else {
        tracing::warn!(
            "replication stream: unknown command {}",
            String::from_utf8_lossy(args.get(0))
        );
        return;
    };
    call(
        shared,
        conn,
        out,
        command,
        &mut Resp(args),
        Caller::Replication,
    );
    if conn.waiting {
        let started = Instant::now();
        while !conn.client.has_mail() && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_micros(50));
        }
        conn.client.take_mail();
        conn.waiting = false;
    }
    if out.starts_with(b"-") {
        tracing::warn!(
            "replication stream: {} failed: {}",
            String::from_utf8_lossy(args.get(0)),
            String::from_utf8_lossy(out).trim_end()
        );
    }
}
