//! TCP probes: a bulk sender and a receiver that times what it gets.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{again, in_netns, join, mono_now, serve, Server};
use crate::testbed::host::Deadline;

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
