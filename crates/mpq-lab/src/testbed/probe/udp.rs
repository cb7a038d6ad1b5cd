//! UDP probes: an echo and RTT probes, a paced blast and its sink.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{again, bind_udp, in_netns, interrupted, join, mono_now, serve, unix_now_ns, Server, UDP_OVERHEAD};
use crate::testbed::host::Deadline;
use crate::testbed::sys;

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
    /// With `record`: (arrival time in Unix ns, link bytes) of every distinct datagram, in
    /// the order of `received`.
    #[serde(skip)]
    pub arrivals: Vec<(u64, u64)>,
}

/// The rate in bit/s that several sinks (recorded with `record`) received at together while
/// every one of them was receiving: link bytes that arrived between the latest first arrival
/// and the earliest last one, over that window. Summing each sink's own `rate_bps` instead
/// overstates a shared bottleneck's rate when the flows start or end at different times (a
/// flow that runs partly alone gets more than its share there); `None` when the sinks never
/// received at the same time.
pub fn common_window_rate_bps(sinks: &[SinkReport]) -> Option<f64> {
    let start = sinks.iter().map(|s| s.arrivals.first().map(|a| a.0)).collect::<Option<Vec<_>>>()?;
    let end = sinks.iter().map(|s| s.arrivals.last().map(|a| a.0)).collect::<Option<Vec<_>>>()?;
    let (from, to) = (start.into_iter().max()?, end.into_iter().min()?);
    if to <= from {
        return None;
    }
    // Bytes that arrived after `from` (the first one at `from` only opens the window).
    let bytes: u64 = sinks.iter().flat_map(|s| &s.arrivals).filter(|a| a.0 > from && a.0 <= to).map(|a| a.1).sum();
    Some(bytes as f64 * 8.0 / ((to - from) as f64 / 1e9))
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
                        r.arrivals.push((unix_now_ns(), (n + UDP_OVERHEAD) as u64));
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
        let size = payload.max(16);
        let bits = ((size + UDP_OVERHEAD) * 8) as f64;
        // Several datagrams per send with UDP GSO when the kernel has it: the sender then
        // costs a fraction of the CPU the emulator needs, which matters on 2 cores at 1 Gbit/s.
        let per_send = if sys::udp_segment(s.as_raw_fd(), size).is_ok() { (60_000 / size).clamp(1, 64) } else { 1 };
        let mut buf = vec![0u8; size * per_send];
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
                let n = ((allowed - sent) as usize).min(per_send);
                let now = unix_now_ns().to_be_bytes();
                for (i, d) in buf.chunks_mut(size).take(n).enumerate() {
                    d[..8].copy_from_slice(&(sent + i as u64).to_be_bytes());
                    d[8..16].copy_from_slice(&now);
                }
                match s.send(&buf[..n * size]) {
                    Ok(_) => sent += n as u64,
                    // A full socket buffer or no route (a path that is down): retry shortly.
                    Err(e) if again(&e) => break,
                    Err(_) => sent += n as u64,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sink_at(arrivals: &[(u64, u64)]) -> SinkReport {
        SinkReport { arrivals: arrivals.to_vec(), ..Default::default() }
    }

    #[test]
    fn common_window_counts_only_the_time_every_sink_received() {
        const MS: u64 = 1_000_000;
        // A ran alone from 0 to 100 ms (1000 bytes a ms), B from 100 to 300 ms; both
        // until 200 ms. Over 100-200 ms: A's and B's 1000 bytes a ms each, 16 Mbit/s.
        let a = sink_at(&(0..=200).map(|t| (t * MS, 1000)).collect::<Vec<_>>());
        let b = sink_at(&(100..=300).map(|t| (t * MS, 1000)).collect::<Vec<_>>());
        let r = common_window_rate_bps(&[a.clone(), b.clone()]).unwrap();
        assert!((r - 16e6).abs() < 1.0, "{r}");
        // Each sink's own span would give 8 Mbit/s each, but the sum is not the shared rate
        // whenever the spans differ; disjoint spans have no common window.
        let c = sink_at(&[(400 * MS, 1000), (500 * MS, 1000)]);
        assert_eq!(common_window_rate_bps(&[a.clone(), c]), None);
        assert_eq!(common_window_rate_bps(&[a, sink_at(&[])]), None);
    }
}
