//! A UDP socket with quinn-udp's segmentation offload and batched receive.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use quinn_udp::{RecvMeta, UdpSockRef, UdpSocketState};

/// Socket buffer size requested from the kernel: enough for a few GSO bursts at 10 Gbit/s.
const SOCKET_BUFFER: usize = 8 << 20;

/// When a socket turns SO_REUSEPORT on: never, before its bind (to join a bound address), or
/// after it (to hold an address alone and let the process's own sockets join it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reuse {
    Never,
    Before,
    After,
}

/// A non-blocking UDP socket registered with mio, sending with GSO and receiving with GRO.
pub struct UdpSocket {
    io: mio::net::UdpSocket,
    state: UdpSocketState,
    local: SocketAddr,
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket").field("local", &self.local).finish_non_exhaustive()
    }
}

impl UdpSocket {
    /// Binds `addr` (port 0 picks one).
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        Self::open(addr, Reuse::Never, None)
    }

    /// Binds `addr` for the sockets of this process to share: alone, like [`UdpSocket::bind`]
    /// (an address some other socket holds fails with `AddrInUse`, and port 0 picks a port
    /// nobody uses), then with SO_REUSEPORT turned on, so that sockets connected to one peer
    /// each ([`UdpSocket::bind_connected`]) or other shards ([`UdpSocket::join_shared`]) can
    /// share the address with it: the runtime with a thread per path and the shard runtime
    /// listen this way.
    ///
    /// SO_REUSEPORT is set after the bind because Linux's UDP port search for port 0 skips
    /// only ports held by sockets it could not share with: a socket asking for port 0 with
    /// SO_REUSEPORT set can be given the port of any other SO_REUSEPORT socket of the same
    /// user, and the two then split each other's datagrams (21 of a thousand such binds on
    /// this machine; two tests' servers on one port once answered each other's handshakes).
    pub fn bind_shared(addr: SocketAddr) -> io::Result<Self> {
        Self::open(addr, Reuse::After, None)
    }

    /// Binds `addr` with SO_REUSEPORT, joining the socket bound there by
    /// [`UdpSocket::bind_shared`]: another shard's listener on the same address.
    pub fn join_shared(addr: SocketAddr) -> io::Result<Self> {
        if addr.port() == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "joining needs the port of a bound socket"));
        }
        Self::open(addr, Reuse::Before, None)
    }

    /// A socket for one path: bound to `local` (shared with the listener bound there by
    /// [`UdpSocket::bind_shared`], or bound by it before) and connected to `remote`, so that
    /// the kernel hands the path's datagrams to this socket, and to the thread that owns it,
    /// rather than to the listener (Linux prefers the connected socket of a SO_REUSEPORT
    /// group for its 4-tuple).
    pub fn bind_connected(local: SocketAddr, remote: SocketAddr) -> io::Result<Self> {
        Self::open(local, Reuse::Before, Some(remote))
    }

    fn open(addr: SocketAddr, reuse: Reuse, connect: Option<SocketAddr>) -> io::Result<Self> {
        let domain = socket2::Domain::for_address(addr);
        let sock = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        if addr.is_ipv6() {
            // Dual-stack on the wildcard address; failures only mean v6-only.
            let _ = sock.set_only_v6(false);
        }
        if reuse == Reuse::Before {
            #[cfg(unix)]
            sock.set_reuse_port(true)?;
        }
        // Larger buffers avoid drops during bursts; the kernel may cap them (rmem_max).
        let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
        sock.bind(&addr.into())?;
        if reuse == Reuse::After {
            #[cfg(unix)]
            sock.set_reuse_port(true)?;
        }
        if let Some(remote) = connect {
            sock.connect(&remote.into())?;
        }
        let std_sock: std::net::UdpSocket = sock.into();
        std_sock.set_nonblocking(true)?;
        // quinn-udp sets the Don't Fragment bit here (Linux: IP_MTU_DISCOVER =
        // IP_PMTUDISC_PROBE and IPV6_MTU_DISCOVER = IPV6_PMTUDISC_PROBE, elsewhere
        // IP_DONTFRAG / IPV6_DONTFRAG): QUIC datagrams must not be fragmented (RFC 9000
        // §14), and the PROBE mode leaves PMTU discovery to the paths' DPLPMTUD (RFC 8899)
        // instead of a route MTU cached from ICMP, while a datagram above the interface's
        // MTU still fails with EMSGSIZE (`EventLoop::flush` treats it as lost).
        let state = UdpSocketState::new(UdpSockRef::from(&std_sock))?;
        let local = std_sock.local_addr()?;
        Ok(Self { io: mio::net::UdpSocket::from_std(std_sock), state, local })
    }

    /// Sets the kernel's receive and send buffer sizes (SO_RCVBUF, SO_SNDBUF; `None` keeps
    /// the current one) and returns the sizes in effect. Linux doubles what is asked (for
    /// its bookkeeping) and caps it at net.core.rmem_max / wmem_max, so the result may be
    /// smaller than asked: callers tell the user.
    pub fn set_buffer_sizes(&self, recv: Option<usize>, send: Option<usize>) -> io::Result<(usize, usize)> {
        let sock = socket2::SockRef::from(&self.io);
        if let Some(n) = recv {
            sock.set_recv_buffer_size(n)?;
        }
        if let Some(n) = send {
            sock.set_send_buffer_size(n)?;
        }
        Ok((sock.recv_buffer_size()?, sock.send_buffer_size()?))
    }

    /// Turns the kernel's receive coalescing (UDP GRO, which quinn-udp enables where the
    /// kernel has it) off or on: off, every datagram is one receive (the "GRO off" case of
    /// the offload comparisons).
    #[cfg(target_os = "linux")]
    pub fn set_gro(&self, on: bool) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let value: libc::c_int = on.into();
        #[allow(unsafe_code)]
        // SAFETY: setsockopt on our own socket's descriptor with a pointer to a c_int and its
        // size, as UDP_GRO takes.
        let r = unsafe {
            libc::setsockopt(
                self.io.as_raw_fd(),
                libc::SOL_UDP,
                libc::UDP_GRO,
                std::ptr::from_ref(&value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Steers the datagrams that reach this socket's SO_REUSEPORT group by QUIC connection
    /// ID, in the kernel (a classic BPF program, SO_ATTACH_REUSEPORT_CBPF, which the group
    /// shares): a short header goes to the group's socket whose index (its place in the
    /// order the group's sockets were bound) is the first byte of its destination CID, i.e.
    /// the shard whose [`mpq_proto::endpoint::EndpointConfig::cid_prefix`] it carries; a long
    /// header goes to socket `long_headers`. An index past the group's end (`u32::MAX` for
    /// long headers that the kernel should place) falls back to the kernel's hash of the
    /// addresses.
    #[cfg(target_os = "linux")]
    pub fn steer_by_cid_prefix(&self, long_headers: u32) -> io::Result<()> {
        use libc::{sock_filter, BPF_A, BPF_ABS, BPF_B, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET};
        let op = |code: u32, jt: u8, jf: u8, k: u32| sock_filter { code: code as u16, jt, jf, k };
        // The program sees the UDP payload at offset 0.
        let program = [
            // A = first byte; long header (0x80 set): jump to the last instruction.
            op(BPF_LD | BPF_B | BPF_ABS, 0, 0, 0),
            op(BPF_JMP | BPF_JSET | BPF_K, 2, 0, 0x80),
            // Short header: the DCID's first byte is the index. (A datagram too short for
            // it ends the program with 0: the first socket, which drops it.)
            op(BPF_LD | BPF_B | BPF_ABS, 0, 0, 1),
            op(BPF_RET | BPF_A, 0, 0, 0),
            op(BPF_RET | BPF_K, 0, 0, long_headers),
        ];
        let fprog = libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr() as *mut sock_filter };
        use std::os::fd::AsRawFd;
        // SAFETY: `fprog` points at `program`, which outlives the call; the kernel copies
        // the program and reads nothing else; the length passed is the struct's.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::setsockopt(
                self.io.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_REUSEPORT_CBPF,
                (&fprog as *const libc::sock_fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The kernel's receive and send buffer sizes (SO_RCVBUF, SO_SNDBUF).
    pub fn buffer_sizes(&self) -> io::Result<(usize, usize)> {
        self.set_buffer_sizes(None, None)
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The kernel may fragment what this socket sends (false where the Don't Fragment bit
    /// could be set, e.g. on Linux: PMTU probes then really test the path).
    pub fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }

    /// Most segments one GSO send may carry (1 without GSO).
    pub fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Most datagrams the kernel may coalesce into one GRO buffer.
    pub fn gro_segments(&self) -> usize {
        self.state.gro_segments()
    }

    /// Sends one datagram or a GSO batch. `Ok(false)` means the socket would block.
    pub fn send(
        &self,
        destination: SocketAddr,
        contents: &[u8],
        segment_size: Option<usize>,
        ecn: Option<u8>,
    ) -> io::Result<bool> {
        self.send_from(destination, None, contents, segment_size, ecn)
    }

    /// [`Self::send`] with a source IP for a socket bound to the wildcard address (the
    /// kernel's IP_PKTINFO), so that a multihomed host answers each path from the address
    /// the peer wrote to.
    pub fn send_from(
        &self,
        destination: SocketAddr,
        src_ip: Option<std::net::IpAddr>,
        contents: &[u8],
        segment_size: Option<usize>,
        ecn: Option<u8>,
    ) -> io::Result<bool> {
        let src_ip = src_ip.filter(|_| self.local.ip().is_unspecified());
        let t = quinn_udp::Transmit {
            destination,
            ecn: ecn.and_then(quinn_udp::EcnCodepoint::from_bits),
            contents,
            segment_size,
            src_ip,
        };
        match self.state.try_send(UdpSockRef::from(&self.io), &t) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Receives a batch into `bufs`; returns how many slots were filled (0: would block).
    pub fn recv(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> io::Result<usize> {
        match self.state.recv(UdpSockRef::from(&self.io), bufs, meta) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn mio(&mut self) -> &mut mio::net::UdpSocket {
        &mut self.io
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The sockets never fragment (RFC 9000 §14): on Linux the Don't Fragment bit is set on
    /// IPv4 and IPv6 sockets alike, so a PMTU probe tests the path, not the reassembly.
    #[cfg(target_os = "linux")]
    #[test]
    fn sockets_do_not_fragment() {
        for addr in ["127.0.0.1:0", "[::1]:0", "0.0.0.0:0", "[::]:0"] {
            let Ok(s) = UdpSocket::bind(addr.parse().unwrap()) else { continue };
            assert!(!s.may_fragment(), "{addr}");
        }
    }

    /// A GSO batch of ten 1200-byte segments plus a short tail crosses loopback intact,
    /// whether the kernel coalesces it (GRO) or not.
    #[test]
    fn gso_batch_arrives_whole() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut b = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut payload = Vec::new();
        for i in 0..10u8 {
            payload.extend(std::iter::repeat_n(i, 1200));
        }
        payload.extend(std::iter::repeat_n(0xee, 500));
        let seg = if a.max_gso_segments() > 1 { Some(1200) } else { None };
        let sent = if seg.is_some() {
            a.send(b.local_addr(), &payload, seg, None).unwrap()
        } else {
            payload.chunks(1200).all(|c| a.send(b.local_addr(), c, None, None).unwrap())
        };
        assert!(sent);

        let mut poll = mio::Poll::new().unwrap();
        poll.registry().register(b.mio(), mio::Token(0), mio::Interest::READABLE).unwrap();
        let mut events = mio::Events::with_capacity(4);
        let mut bufs: Vec<Vec<u8>> = (0..quinn_udp::BATCH_SIZE).map(|_| vec![0u8; 65536]).collect();
        let mut got: Vec<Vec<u8>> = Vec::new();
        // Bounded: at most 50 waits of 100 ms for 11 datagrams that are already sent.
        for _ in 0..50 {
            if got.len() == 11 {
                break;
            }
            poll.poll(&mut events, Some(Duration::from_millis(100))).unwrap();
            loop {
                let mut meta = [RecvMeta::default(); quinn_udp::BATCH_SIZE];
                let mut slices: Vec<IoSliceMut<'_>> = bufs.iter_mut().map(|x| IoSliceMut::new(x)).collect();
                let n = b.recv(&mut slices, &mut meta).unwrap();
                if n == 0 {
                    break;
                }
                for (m, buf) in meta.iter().zip(&bufs).take(n) {
                    for d in buf[..m.len].chunks(m.stride.max(1)) {
                        got.push(d.to_vec());
                    }
                }
            }
        }
        assert_eq!(got.len(), 11);
        assert_eq!(got.concat(), payload);
        assert!(got[..10].iter().all(|d| d.len() == 1200));
    }

    /// Sockets bound shared on port 0 each get a port of their own (a thousand at once:
    /// with SO_REUSEPORT set before the bind, about twenty of them shared a port), an
    /// address held by one is refused to another, and the process's own sockets join it.
    #[test]
    fn shared_sockets_hold_their_port_alone_until_joined() {
        let held: Vec<UdpSocket> =
            (0..1000).map(|_| UdpSocket::bind_shared("127.0.0.1:0".parse().unwrap()).expect("bind")).collect();
        let ports: std::collections::HashSet<u16> = held.iter().map(|s| s.local_addr().port()).collect();
        assert_eq!(ports.len(), held.len(), "ports given twice");
        let addr = held[0].local_addr();
        let taken = UdpSocket::bind_shared(addr).expect_err("a held address");
        assert_eq!(taken.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(UdpSocket::bind(addr).expect_err("a held address").kind(), io::ErrorKind::AddrInUse);
        let joined = UdpSocket::join_shared(addr).expect("a shard joins");
        assert_eq!(joined.local_addr(), addr);
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        UdpSocket::bind_connected(addr, peer.local_addr().unwrap()).expect("a path's socket joins");
        assert_eq!(
            UdpSocket::join_shared("127.0.0.1:0".parse().unwrap()).expect_err("port 0").kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
