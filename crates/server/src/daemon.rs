//! Running under a supervisor: the log destination (stderr or a file that SIGHUP reopens, for
//! logrotate) and systemd's readiness protocol (`Type=notify`: READY=1 once the listeners are
//! open and the snapshot is loaded, STOPPING=1 at shutdown), hand-written: one datagram to
//! `$NOTIFY_SOCKET` needs no dependency. A leaf: `main` wires these to the server.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use tracing_subscriber::fmt::MakeWriter;

/// A log file opened for appending, reopened on request (SIGHUP) so that a rotated file is
/// let go and a new one created at the same path.
pub struct LogFile {
    path: PathBuf,
    file: Mutex<File>,
}

impl LogFile {
    pub fn open(path: &Path) -> std::io::Result<Arc<LogFile>> {
        Ok(Arc::new(LogFile {
            path: path.to_path_buf(),
            file: Mutex::new(Self::append(path)?),
        }))
    }

    fn append(path: &Path) -> std::io::Result<File> {
        OpenOptions::new().create(true).append(true).open(path)
    }

    /// Opens the path again; on failure the old file stays in use.
    pub fn reopen(&self) -> std::io::Result<()> {
        let fresh = Self::append(&self.path)?;
        *self.file.lock() = fresh;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One log line's writer: the formatter writes a whole line in one call, under the lock, so
/// lines from several threads never interleave and a reopen falls between lines.
pub struct LogLine<'a>(MutexGuard<'a, File>);

impl Write for LogLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The `MakeWriter` tracing's formatter takes.
#[derive(Clone)]
pub struct LogSink(pub Arc<LogFile>);

impl<'a> MakeWriter<'a> for LogSink {
    type Writer = LogLine<'a>;
    fn make_writer(&'a self) -> LogLine<'a> {
        LogLine(self.0.file.lock())
    }
}

/// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=...`) to the service manager when it
/// asked for notifications (`$NOTIFY_SOCKET`, set by systemd for `Type=notify`). Returns
/// whether it was sent; without the variable there is nobody to tell.
pub fn sd_notify(state: &str) -> std::io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let socket = std::os::unix::net::UnixDatagram::unbound()?;
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        // An abstract socket (Linux): the name without the `@`.
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        socket.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        socket.send_to(state.as_bytes(), &path)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_file_reopen_follows_a_rotation() {
        let dir = std::env::temp_dir().join(format!("cairn-logfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cairn.log");
        let log = LogFile::open(&path).unwrap();
        let sink = LogSink(log.clone());
        sink.make_writer().write_all(b"before\n").unwrap();
        std::fs::rename(&path, dir.join("cairn.log.1")).unwrap();
        // Until the reopen, lines still go to the rotated file.
        sink.make_writer().write_all(b"rotated\n").unwrap();
        log.reopen().unwrap();
        sink.make_writer().write_all(b"after\n").unwrap();
        let old = std::fs::read_to_string(dir.join("cairn.log.1")).unwrap();
        assert_eq!(old, "before\nrotated\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "after\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
