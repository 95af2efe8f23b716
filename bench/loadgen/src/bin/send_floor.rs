//! `send-floor`: what the kernel alone charges a sender for writing one batch's replication
//! stream to N loopback TCP receivers that sleep in epoll between batches, as replicas do.
//!
//! The primary's CPU per SET with replicas (bench/replication.py) includes one `sendmsg` per
//! replica per batch; on loopback that call also runs the receiver's TCP receive and wakes its
//! thread (softirq in the sender's context). This program does nothing but those sends, timed
//! with the sender thread's own CPU clock around the sends only, so its figure is a floor no
//! server code can go below on this machine: how much of the extra CPU per SET is the kernel's.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use clap::Parser;
use mio::net::TcpStream as MioStream;
use mio::{Events, Interest, Poll, Token};

#[derive(Parser)]
#[command(about = "Sender CPU per batch sent to N loopback receivers sleeping in epoll")]
struct Args {
    /// Receivers (replicas).
    #[arg(long, default_value_t = 2)]
    receivers: usize,
    /// Bytes per send (a batch's stream: changes per batch x stream bytes per change).
    #[arg(long, default_value_t = 7930)]
    bytes: usize,
    /// Batches sent.
    #[arg(long, default_value_t = 20000)]
    batches: usize,
    /// Pause between batches in µs, so that the receivers go back to sleep (0: none).
    #[arg(long, default_value_t = 100)]
    gap_us: u64,
    /// Spend the pause spinning instead of sleeping, as a server busy with its next batch
    /// would: the sender's core stays awake, only the receivers' sleep.
    #[arg(long)]
    spin: bool,
}

fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// A receiver: epoll (mio) on one socket, read everything ready, sleep again; ends at EOF.
fn receive(stream: TcpStream) {
    stream.set_nonblocking(true).expect("nonblocking");
    let mut stream = MioStream::from_std(stream);
    let mut poll = Poll::new().expect("epoll");
    poll.registry()
        .register(&mut stream, Token(0), Interest::READABLE)
        .expect("register");
    let mut events = Events::with_capacity(4);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        if poll.poll(&mut events, None).is_err() {
            continue;
        }
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

fn main() {
    let args = Args::parse();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let mut senders = Vec::new();
    let mut threads = Vec::new();
    for _ in 0..args.receivers {
        let stream = TcpStream::connect(addr).expect("connect");
        threads.push(std::thread::spawn(move || receive(stream)));
        let (sender, _) = listener.accept().expect("accept");
        sender.set_nodelay(true).expect("nodelay");
        senders.push(sender);
    }
    let batch = vec![b'x'; args.bytes];
    let gap = Duration::from_micros(args.gap_us);
    let mut cpu = 0u64;
    for _ in 0..args.batches {
        let start = thread_cpu_ns();
        for s in &mut senders {
            s.write_all(&batch).expect("send");
        }
        cpu += thread_cpu_ns() - start;
        if args.gap_us > 0 {
            if args.spin {
                let until = std::time::Instant::now() + gap;
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::sleep(gap);
            }
        }
    }
    drop(senders);
    for t in threads {
        let _ = t.join();
    }
    let per_batch_us = cpu as f64 / args.batches as f64 / 1e3;
    println!(
        "{{\"receivers\": {}, \"bytes\": {}, \"batches\": {}, \"gap_us\": {}, \"spin\": {}, \"sender_cpu_us_per_batch\": {:.3}}}",
        args.receivers, args.bytes, args.batches, args.gap_us, args.spin, per_batch_us
    );
}
