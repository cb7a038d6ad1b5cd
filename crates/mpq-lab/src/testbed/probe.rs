//! Traffic to measure a testbed with, from threads that enter its namespaces (so one
//! process drives both ends): a UDP echo and RTT probes (what ping does), a paced UDP
//! blast and its sink (rate, loss, which packets an outage took), and a TCP bulk
//! transfer. Datagrams carry a sequence number and their send time.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use super::host::Deadline;
use super::sys;

/// IPv4 and UDP headers: what a datagram of N payload bytes adds on the link.
pub const UDP_OVERHEAD: usize = 28;

#[allow(clippy::disallowed_methods)] // measuring real time is the point
fn mono_now() -> std::time::Instant {
    std::time::Instant::now()
}

/// Unix time in nanoseconds (what probe packets carry, comparable across namespaces and
/// with the emulator's `started_unix_ns`).
#[allow(clippy::disallowed_methods)] // measuring real time is the point
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Whether a socket call should just be tried again: nothing was ready, its timeout passed,
/// or a signal interrupted it. A socket call with a timeout returns EINTR even for a signal
/// whose handler asks for restarts (socket(7)); the test processes saw such interruptions
/// (one reset a TCP transfer in about 1 of 15 runs before this retried them).
fn again(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// A probe stopped by SIGINT or SIGTERM (when the process catches them, as `up` does).
fn interrupted() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "interrupted")
}

/// Runs `f` on a new thread inside network namespace `ns`.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> JoinHandle<io::Result<T>> {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        sys::enter_netns(&ns)?;
        f()
    })
}

/// Waits for a thread started by [`in_netns`].
pub fn join<T>(h: JoinHandle<io::Result<T>>) -> io::Result<T> {
    h.join().map_err(|_| io::Error::other("probe thread panicked"))?
}

fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
    // Deep buffers: the probes measure the link, not the socket.
    let _ = sys::force_buffer(s.as_raw_fd(), true, 16 << 20);
    let _ = sys::force_buffer(s.as_raw_fd(), false, 4 << 20);
    Ok(s)
}

/// A thread serving until dropped (or [`Server::stop`]).
pub struct Server<T> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<T>>>,
}

impl<T> Server<T> {
    /// Stops the thread and returns its result.
    pub fn stop(mut self) -> io::Result<T> {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.take() {
            Some(h) => join(h),
            None => Err(io::Error::other("already stopped")),
        }
    }
}

impl<T> Server<T> {
    /// Waits up to `limit` for the thread to end by itself (a sink ends once idle), then
    /// stops it and returns its result.
    pub fn finish_within(self, limit: Duration) -> io::Result<T> {
        let deadline = Deadline::after(limit);
        while self.handle.as_ref().is_some_and(|h| !h.is_finished()) && !deadline.passed() {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop()
    }
}

impl<T> Drop for Server<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Starts `body(socket-ready-callback, stop)` in `ns` and returns once it said it is ready
/// (bounded) or failed.
fn serve<T: Send + 'static>(
    ns: &str,
    body: impl FnOnce(&dyn Fn(), &AtomicBool) -> io::Result<T> + Send + 'static,
) -> io::Result<Server<T>> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<()>();
    let s2 = stop.clone();
    let handle = in_netns(ns, move || {
        let ready = move || {
            let _ = tx.send(());
        };
        body(&ready, &s2)
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(()) => Ok(Server { stop, handle: Some(handle) }),
        Err(_) => {
            stop.store(true, Ordering::SeqCst);
            match join(handle) {
                Err(e) => Err(e),
                Ok(_) => Err(io::Error::other("the probe server did not start")),
            }
        }
    }
}

/// A UDP echo server at `addr` in `ns`: sends every datagram back; returns how many.
pub fn echo(ns: &str, addr: SocketAddr) -> io::Result<Server<u64>> {
    serve(ns, move |ready, stop| {
        let s = bind_udp(addr)?;
        s.set_read_timeout(Some(Duration::from_millis(20)))?;
        ready();
        let mut buf = vec![0u8; 65536];
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            match s.recv_from(&mut buf) {
                Ok((len, from)) => {
                    let _ = s.send_to(&buf[..len], from);
                    n += 1;
                }
                Err(e) if again(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    })
}

/// Round-trip times of echoed probes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RttStats {
    /// Probes sent.
    pub sent: u64,
    /// Replies received.
    pub received: u64,
    /// Smallest RTT, ms.
    pub min_ms: f64,
    /// Median RTT, ms.
    pub median_ms: f64,
    /// Mean RTT, ms.
    pub mean_ms: f64,
    /// Largest RTT, ms.
    pub max_ms: f64,
}

/// Sends `count` probes of `size` payload bytes from `from` to the echo at `to`, one every
/// `interval`, from namespace `ns`; waits up to `linger` after the last for replies.
pub fn rtt(
    ns: &str,
    from: Ipv4Addr,
    to: SocketAddr,
    count: u64,
    interval: Duration,
    size: usize,
    linger: Duration,
) -> io::Result<RttStats> {
    join(in_netns(ns, move || {
        sys::tight_timer_slack();
        let s = bind_udp(SocketAddr::V4(SocketAddrV4::new(from, 0)))?;
        s.connect(to)?;
        s.set_nonblocking(true)?;
        let start = mono_now();
        let mut pkt = vec![0u8; size.max(16)];
        let mut buf = vec![0u8; 65536];
        let mut rtts = Vec::new();
        let mut seen = vec![false; count as usize];
        let mut recv = |rtts: &mut Vec<f64>, seen: &mut Vec<bool>| {
            while let Ok(n) = s.recv(&mut buf) {
                if n < 16 {
                    continue;
                }
                let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or_default()) as usize;
                let sent = u64::from_be_bytes(buf[8..16].try_into().unwrap_or_default());
                if seq < seen.len() && !seen[seq] {
                    seen[seq] = true;
                    let now = start.elapsed().as_nanos() as u64;
                    rtts.push(now.saturating_sub(sent) as f64 / 1e6);
                }
            }
        };
        let fd = [s.as_raw_fd()];
        let mut ready = Vec::new();
        // Sleeps in ppoll on the socket until the next send is due, so that a reply is
        // timed the moment it is readable.
        let mut wait = |limit: Duration, rtts: &mut Vec<f64>, seen: &mut Vec<bool>| -> io::Result<()> {
            sys::wait_readable(&fd, Some(limit), &mut ready)?;
            recv(rtts, seen);
            Ok(())
        };
        for i in 0..count {
            if sys::stop_requested() {
                return Err(interrupted());
            }
            let due = interval * i as u32;
            loop {
                let el = start.elapsed();
                if el >= due {
                    break;
                }
                wait(due - el, &mut rtts, &mut seen)?;
            }
            pkt[..8].copy_from_slice(&i.to_be_bytes());
            pkt[8..16].copy_from_slice(&(start.elapsed().as_nanos() as u64).to_be_bytes());
            let _ = s.send(&pkt);
        }
        let deadline = Deadline::after(linger);
        while (rtts.len() as u64) < count && !deadline.passed() {
            wait(Duration::from_millis(10), &mut rtts, &mut seen)?;
        }
        Ok(rtt_stats(count, rtts))
    }))
}

fn rtt_stats(sent: u64, mut rtts: Vec<f64>) -> RttStats {
    rtts.sort_by(f64::total_cmp);
    let n = rtts.len();
    let pick = |q: f64| if n == 0 { f64::NAN } else { rtts[((n - 1) as f64 * q).round() as usize] };
    RttStats {
        sent,
        received: n as u64,
        min_ms: pick(0.0),
        median_ms: pick(0.5),
        mean_ms: if n == 0 { f64::NAN } else { rtts.iter().sum::<f64>() / n as f64 },
        max_ms: pick(1.0),
    }
}

/// What a UDP sink received.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SinkReport {
    /// Distinct sequence numbers received.
    pub unique: u64,
    /// Datagrams received more than once.
    pub duplicates: u64,
    /// Bytes on the link of the distinct datagrams (payload + IPv4 and UDP headers).
    pub ip_bytes: u64,
    /// Seconds from the first to the last datagram.
    pub span_s: f64,
    /// Link bytes after the first datagram, over `span_s`: the rate the path delivered at,
    /// in bit/s.
    pub rate_bps: f64,
    /// With `record`: (sequence number, send time in Unix ns) of every distinct datagram.
    #[serde(skip)]
    pub received: Vec<(u64, u64)>,
}

/// A UDP sink at `addr` in `ns`; it ends (see [`Server::stop`]) when stopped, or after
/// `idle` without datagrams once one came. With `record`, it keeps what it received.
pub fn sink(ns: &str, addr: SocketAddr, idle: Duration, record: bool) -> io::Result<Server<SinkReport>> {
    serve(ns, move |ready, stop| {
        let s = bind_udp(addr)?;
        s.set_read_timeout(Some(Duration::from_millis(10)))?;
        ready();
        let mut buf = vec![0u8; 65536];
        let mut seen: Vec<bool> = Vec::new();
        let mut r = SinkReport::default();
        let (mut first, mut last) = (None, mono_now());
        let mut after_first = 0u64;
        loop {
            match s.recv(&mut buf) {
                Ok(n) if n >= 16 => {
                    let now = mono_now();
                    let seq = u64::from_be_bytes(buf[..8].try_into().unwrap_or_default());
                    let sent = u64::from_be_bytes(buf[8..16].try_into().unwrap_or_default());
                    let i = seq as usize;
                    if i >= seen.len() {
                        seen.resize((i + 1).max(seen.len() * 2), false);
                    }
                    if seen[i] {
                        r.duplicates += 1;
                        continue;
                    }
                    seen[i] = true;
                    r.unique += 1;
                    r.ip_bytes += (n + UDP_OVERHEAD) as u64;
                    if first.is_none() {
                        first = Some(now);
                    } else {
                        after_first += (n + UDP_OVERHEAD) as u64;
                    }
                    last = now;
                    if record {
                        r.received.push((seq, sent));
                    }
                }
                Ok(_) => {}
                Err(e) if again(&e) => {
                    if stop.load(Ordering::SeqCst) || (first.is_some() && last.elapsed() >= idle) {
                        break;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(f) = first {
            r.span_s = last.duration_since(f).as_secs_f64();
            if r.span_s > 0.0 {
                r.rate_bps = after_first as f64 * 8.0 / r.span_s;
            }
        }
        Ok(r)
    })
}

/// What a blast sent.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BlastReport {
    /// Datagrams sent.
    pub sent: u64,
    /// Seconds it took.
    pub duration_s: f64,
    /// The rate it offered, in link bits per second (payload + headers).
    pub offered_bps: f64,
}

/// Sends `count` datagrams of `payload` bytes from `from` to `to`, paced at `rate_bps` on
/// the link (payload + 28 header bytes; 0: as fast as the socket takes them), from `ns`.
pub fn blast(
    ns: &str,
    from: Ipv4Addr,
    to: SocketAddr,
    payload: usize,
    rate_bps: f64,
    count: u64,
) -> io::Result<BlastReport> {
    join(in_netns(ns, move || {
        sys::tight_timer_slack();
        let s = bind_udp(SocketAddr::V4(SocketAddrV4::new(from, 0)))?;
        s.connect(to)?;
        let mut pkt = vec![0u8; payload.max(16)];
        let bits = ((pkt.len() + UDP_OVERHEAD) * 8) as f64;
        let start = mono_now();
        let mut sent = 0u64;
        while sent < count {
            if sys::stop_requested() {
                return Err(interrupted());
            }
            // Send what the schedule allows by now, then sleep a little: bursts of a few
            // datagrams at high rates, which the link's queue smooths as a router's would.
            let allowed = if rate_bps > 0.0 {
                ((start.elapsed().as_secs_f64() * rate_bps / bits) as u64 + 1).min(count)
            } else {
                count
            };
            while sent < allowed {
                pkt[..8].copy_from_slice(&sent.to_be_bytes());
                pkt[8..16].copy_from_slice(&unix_now_ns().to_be_bytes());
                match s.send(&pkt) {
                    Ok(_) => sent += 1,
                    // A full socket buffer or no route (a path that is down): retry shortly.
                    Err(e) if again(&e) => break,
                    Err(_) => sent += 1,
                }
            }
            if sent < count {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        let d = start.elapsed().as_secs_f64();
        Ok(BlastReport { sent, duration_s: d, offered_bps: if d > 0.0 { sent as f64 * bits / d } else { 0.0 } })
    }))
}

/// What a TCP receiver got.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TcpReport {
    /// Bytes received.
    pub bytes: u64,
    /// Seconds from the first byte to the last.
    pub span_s: f64,
    /// Goodput over that span, bit/s.
    pub goodput_bps: f64,
}

/// A TCP receiver at `addr` in `ns`: takes one connection and reads it to the end.
pub fn tcp_sink(ns: &str, addr: SocketAddr) -> io::Result<Server<TcpReport>> {
    serve(ns, move |ready, stop| {
        let l = TcpListener::bind(addr).map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
        l.set_nonblocking(true)?;
        ready();
        let ctx = |e: io::Error| io::Error::new(e.kind(), format!("TCP sink {addr}: {e}"));
        let mut conn = loop {
            match l.accept() {
                Ok((c, _)) => break c,
                Err(e) if again(&e) => {
                    if stop.load(Ordering::SeqCst) {
                        return Ok(TcpReport::default());
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(ctx(e)),
            }
        };
        conn.set_nonblocking(false)?;
        conn.set_read_timeout(Some(Duration::from_millis(100)))?;
        let mut buf = vec![0u8; 1 << 20];
        let mut r = TcpReport::default();
        let (mut first, mut last) = (None, mono_now());
        loop {
            match conn.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let now = mono_now();
                    first.get_or_insert(now);
                    last = now;
                    r.bytes += n as u64;
                }
                Err(e) if again(&e) => {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                }
                Err(e) => return Err(ctx(e)),
            }
        }
        if let Some(f) = first {
            r.span_s = last.duration_since(f).as_secs_f64();
            if r.span_s > 0.0 {
                r.goodput_bps = r.bytes as f64 * 8.0 / r.span_s;
            }
        }
        Ok(r)
    })
}

/// Sends `bytes` over TCP from `from` to `to`, from `ns`, within `limit`.
pub fn tcp_send(ns: &str, from: Ipv4Addr, to: SocketAddr, bytes: u64, limit: Duration) -> io::Result<()> {
    join(in_netns(ns, move || {
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        sock.bind(&SocketAddr::V4(SocketAddrV4::new(from, 0)).into())?;
        let ctx = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("TCP {what} {to}: {e}"));
        sock.connect_timeout(&to.into(), Duration::from_secs(5)).map_err(|e| ctx("connecting to", e))?;
        let mut s: TcpStream = sock.into();
        s.set_write_timeout(Some(limit))?;
        let chunk = vec![0x5au8; 1 << 16];
        let deadline = Deadline::after(limit);
        let mut left = bytes;
        while left > 0 {
            if deadline.passed() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} of {bytes} bytes sent in {limit:?}", bytes - left),
                ));
            }
            let n = left.min(chunk.len() as u64) as usize;
            s.write_all(&chunk[..n]).map_err(|e| ctx("sending to", e))?;
            left -= n as u64;
        }
        s.shutdown(std::net::Shutdown::Write).map_err(|e| ctx("closing", e))?;
        // Wait for the receiver to close: everything arrived.
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let _ = s.read(&mut [0u8; 1]);
        Ok(())
    }))
}
