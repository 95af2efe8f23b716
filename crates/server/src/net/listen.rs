//! Listening sockets and accepted streams (TCP and unix), independent of the event loop.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use tracing::warn;

use crate::protocol::Protocol;

const BACKLOG: i32 = 4096;

/// An accepted connection.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for &Stream {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).read(buf),
            Stream::Unix(s) => (&*s).read(buf),
        }
    }
}

impl Write for &Stream {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => (&*s).write(buf),
            Stream::Unix(s) => (&*s).write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}

/// A new connection with the addresses CLIENT LIST shows.
pub struct Accepted {
    pub stream: Stream,
    pub addr: String,
    pub laddr: String,
}

pub enum ListenerKind {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// A listening socket and the protocol its connections speak.
pub struct Listener {
    pub kind: ListenerKind,
    pub protocol: Protocol,
    /// For logs: "127.0.0.1:6380" or "/tmp/cairn.sock".
    pub display: String,
}

impl Listener {
    pub fn tcp(addr: SocketAddr, protocol: Protocol) -> io::Result<Listener> {
        use socket2::{Domain, Socket, Type};
        let socket = Socket::new(
            Domain::for_address(addr),
            Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        if addr.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        socket.bind(&addr.into())?;
        socket.listen(BACKLOG)?;
        socket.set_nonblocking(true)?;
        let std: std::net::TcpListener = socket.into();
        let local = std.local_addr()?;
        Ok(Listener {
            kind: ListenerKind::Tcp(TcpListener::from_std(std)),
            protocol,
            display: local.to_string(),
        })
    }

    /// Binds a unix socket, replacing a stale socket file, and applies `perm` (octal mode).
    pub fn unix(path: &Path, perm: Option<u32>, protocol: Protocol) -> io::Result<Listener> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by another process", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        if let Some(mode) = perm {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        }
        Ok(Listener {
            kind: ListenerKind::Unix(listener, path.to_path_buf()),
            protocol,
            display: path.display().to_string(),
        })
    }

    /// Accepts one connection (non-blocking), with TCP_NODELAY set.
    pub fn accept(&self) -> io::Result<Accepted> {
        match &self.kind {
            ListenerKind::Tcp(l) => {
                let (stream, peer) = l.accept()?;
                if let Err(e) = stream.set_nodelay(true) {
                    warn!("TCP_NODELAY: {e}");
                }
                let laddr = stream
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|_| self.display.clone());
                Ok(Accepted {
                    stream: Stream::Tcp(stream),
                    addr: peer.to_string(),
                    laddr,
                })
            }
            ListenerKind::Unix(l, path) => {
                let (stream, _) = l.accept()?;
                let a = format!("{}:0", path.display());
                Ok(Accepted {
                    stream: Stream::Unix(stream),
                    addr: a.clone(),
                    laddr: a,
                })
            }
        }
    }

    pub fn source(&mut self) -> &mut dyn Source {
        match &mut self.kind {
            ListenerKind::Tcp(l) => l,
            ListenerKind::Unix(l, _) => l,
        }
    }

    pub fn unix_path(&self) -> Option<&Path> {
        match &self.kind {
            ListenerKind::Unix(_, p) => Some(p),
            ListenerKind::Tcp(_) => None,
        }
    }
}

/// Resolves `bind` (space or comma separated addresses) with `port`.
pub fn resolve(bind: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    let mut out: Vec<SocketAddr> = Vec::new();
    for host in bind
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|h| !h.is_empty())
    {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => (host, port)
                .to_socket_addrs()
                .map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot resolve bind address {host}: {e}"))
                })?
                .collect(),
        };
        for a in addrs {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    if out.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no bind address in '{bind}'"),
        ));
    }
    Ok(out)
}
