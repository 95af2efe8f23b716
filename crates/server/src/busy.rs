//! What an I/O thread busy running a long script does for the other clients of its own event
//! loop: it cannot return to the loop until the script ends, so past `busy-reply-threshold`
//! the script's interpreter hook calls [`serve_own_loop`] every few milliseconds, which answers
//! each of those clients' next command as Redis does while a script is busy (it keeps serving
//! its one thread's clients): SCRIPT KILL is carried out, anything else gets -BUSY. Without it,
//! a server with `--threads 1` could never kill a runaway script (nothing would read the
//! SCRIPT KILL), and the busy thread's clients would wait instead of hearing -BUSY.
//!
//! Only a connection whose runtime holds nothing of it (no unprocessed input, no unsent
//! output, no mail) is served, and only a whole RESP command waiting at the start of its
//! socket: that command is read (exactly its bytes) and answered straight on the socket, so
//! the connection's own state never sees it and the order of its replies is kept. Only the
//! reactor model calls it (there the busy thread is the only one that reads its connections).

use std::sync::atomic::Ordering::Relaxed;

use resp::request::{parse_request, Limits, Parsed};

use crate::clients::{ClientInfo, ClientRegistry};
use crate::protocol::Protocol;
use crate::scripts::{Scripts, BUSY};

/// The longest command looked at (a SCRIPT KILL is 30 bytes; longer ones wait for the script).
const PEEK: usize = 512;

/// Answers the next command of each idle client that shares `me`'s event loop (see the
/// module notes).
pub fn serve_own_loop(clients: &ClientRegistry, scripts: &Scripts, me: &ClientInfo) {
    let mut args = Vec::new();
    let mut scratch = Vec::new();
    for c in clients.list() {
        if c.id == me.id
            || !c.same_loop(me)
            || c.protocol != Protocol::Resp
            || c.fd < 0
            || c.closed()
            || c.has_mail()
            || c.qbuf.load(Relaxed) != 0
            || c.omem.load(Relaxed) != 0
        {
            continue;
        }
        let mut buf = [0u8; PEEK];
        // SAFETY: `buf` is writable for PEEK bytes; the fd belongs to the live connection.
        let n = unsafe {
            libc::recv(
                c.fd,
                buf.as_mut_ptr().cast(),
                PEEK,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n <= 0 || buf[0] != b'*' {
            continue;
        }
        let peeked = &buf[..n as usize];
        let Ok((Parsed::Complete(len), _)) =
            parse_request(peeked, &Limits::default(), &mut args, &mut scratch)
        else {
            continue;
        };
        if args.is_empty() {
            continue;
        }
        let arg = |i: usize| peeked[args[i].clone()].to_ascii_lowercase();
        let reply: Vec<u8> = if args.len() == 2 && arg(0) == b"script" && arg(1) == b"kill" {
            match scripts.kill() {
                Ok(()) => b"+OK\r\n".to_vec(),
                Err(msg) => [b"-", msg, b"\r\n"].concat(),
            }
        } else {
            [b"-", BUSY, b"\r\n"].concat()
        };
        // Take exactly the command's bytes (they are in the socket: just peeked), then answer.
        // SAFETY: as above, `len` <= PEEK.
        let taken = unsafe { libc::recv(c.fd, buf.as_mut_ptr().cast(), len, libc::MSG_DONTWAIT) };
        if taken != len as isize {
            continue;
        }
        // SAFETY: `reply` is readable for its length; a full socket drops the short reply,
        // which cannot happen with nothing unsent (`omem` 0) and a reply of a few bytes.
        unsafe {
            libc::send(
                c.fd,
                reply.as_ptr().cast(),
                reply.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            );
        }
    }
}
