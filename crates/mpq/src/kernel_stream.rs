//! Kernel stream sockets for `mpq perf --transport tcp-tls|mptcp-tls`: TCP or MPTCP
//! (`IPPROTO_MPTCP`, 262) sockets made with socket2, with an error that says what to do when
//! the kernel refuses MPTCP, and the two MPTCP socket options the report needs (whether a
//! connection really is MPTCP, and its subflows), which socket2 does not wrap.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// `SOL_TCP`'s `TCP_IS_MPTCP` (linux/tcp.h, Linux 5.16): 1 on an MPTCP connection, 0 on a
/// plain TCP socket or an MPTCP one that fell back to TCP (the peer did not take MP_CAPABLE).
const TCP_IS_MPTCP: libc::c_int = 43;
/// `SOL_MPTCP` (linux/socket.h) and its `MPTCP_INFO` option (linux/mptcp.h, Linux 5.16).
const SOL_MPTCP: libc::c_int = 284;
const MPTCP_INFO: libc::c_int = 1;

/// Which kernel protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `IPPROTO_TCP`.
    Tcp,
    /// `IPPROTO_MPTCP`.
    Mptcp,
}

/// Socket and buffer options of a kernel stream socket.
#[derive(Debug, Clone, Default)]
pub struct Buffers {
    /// `SO_RCVBUF` in bytes; `None` keeps the kernel's autotuning (setting it turns that off).
    pub rcvbuf: Option<usize>,
    /// `SO_SNDBUF` in bytes; `None` keeps the kernel's autotuning.
    pub sndbuf: Option<usize>,
    /// `TCP_CONGESTION`: the congestion control's name; `None` keeps the kernel's default.
    pub congestion: Option<String>,
}

/// A new stream socket of `kind` for addresses like `like`, with `buffers` applied.
pub fn socket(kind: Kind, like: SocketAddr, buffers: &Buffers) -> Result<Socket> {
    let protocol = match kind {
        Kind::Tcp => Protocol::TCP,
        Kind::Mptcp => Protocol::MPTCP,
    };
    let sock = Socket::new(Domain::for_address(like), Type::STREAM, Some(protocol)).map_err(|e| match kind {
        Kind::Tcp => anyhow!("cannot create a TCP socket: {e}"),
        Kind::Mptcp => mptcp_refused(&e),
    })?;
    if let Some(b) = buffers.rcvbuf {
        sock.set_recv_buffer_size(b).with_context(|| format!("--rcvbuf {b}"))?;
    }
    if let Some(b) = buffers.sndbuf {
        sock.set_send_buffer_size(b).with_context(|| format!("--sndbuf {b}"))?;
    }
    if let Some(cc) = &buffers.congestion {
        sock.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
            anyhow!(
                "--tcp-cc {cc}: the kernel refused it ({e}); it must be one of `sysctl net.ipv4.tcp_available_congestion_control` \
                 (load its module, e.g. `modprobe tcp_{cc}`), and without CAP_NET_ADMIN one of net.ipv4.tcp_allowed_congestion_control"
            )
        })?;
    }
    Ok(sock)
}

/// What to tell the user when `socket(IPPROTO_MPTCP)` fails: the kernel says ENOPROTOOPT
/// when MPTCP is disabled in the namespace and EPROTONOSUPPORT (or EINVAL on old kernels)
/// when it was built without it.
fn mptcp_refused(e: &io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(libc::ENOPROTOOPT) => anyhow!(
            "the kernel refused an MPTCP socket ({e}): MPTCP is disabled in this network namespace; \
             enable it with `sysctl net.mptcp.enabled=1` (in the namespace: `ip netns exec NS sysctl net.mptcp.enabled=1`)"
        ),
        Some(libc::EPROTONOSUPPORT) | Some(libc::EINVAL) => anyhow!(
            "the kernel refused an MPTCP socket ({e}): this kernel has no MPTCP (it needs Linux 5.6 or later \
             built with CONFIG_MPTCP=y); use --transport tcp-tls or quic"
        ),
        _ => anyhow!("cannot create an MPTCP socket: {e} (is `sysctl net.mptcp.enabled` 1?)"),
    }
}

/// A listening socket of `kind` on `addr` (an IPv6 wildcard takes IPv4 clients too, as the
/// QUIC server's socket does).
pub fn listen(kind: Kind, addr: SocketAddr, buffers: &Buffers) -> Result<std::net::TcpListener> {
    let sock = socket(kind, addr, buffers)?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        sock.set_only_v6(false)?;
    }
    sock.bind(&SockAddr::from(addr)).with_context(|| format!("--listen {addr}: cannot bind"))?;
    sock.listen(1024).with_context(|| format!("--listen {addr}: cannot listen"))?;
    Ok(sock.into())
}

/// Connects a socket of `kind` from `local` (if given; port 0 lets the kernel choose) to
/// `server` within `timeout`.
pub fn connect(
    kind: Kind,
    local: Option<SocketAddr>,
    server: SocketAddr,
    buffers: &Buffers,
    timeout: Duration,
) -> Result<std::net::TcpStream> {
    let sock = socket(kind, server, buffers)?;
    if let Some(l) = local {
        sock.bind(&SockAddr::from(l)).with_context(|| format!("--local {l}: cannot bind"))?;
    }
    let addr = SockAddr::from(server);
    let r = if timeout.is_zero() { sock.connect(&addr) } else { sock.connect_timeout(&addr, timeout) };
    r.with_context(|| format!("cannot connect to {server}"))?;
    Ok(sock.into())
}

/// One integer socket option, or `None` if the kernel does not have it for this socket.
fn int_option(fd: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`, which lives across the call,
    // and updates `len`; the descriptor is open for the call's duration.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), level, name, &mut v as *mut libc::c_int as *mut libc::c_void, &mut len)
    };
    (rc == 0).then_some(v)
}

/// The congestion control of a TCP socket (`TCP_CONGESTION`), if the kernel says.
pub fn congestion_control(sock: &std::net::TcpStream) -> Option<String> {
    let name = socket2::SockRef::from(sock).tcp_congestion().ok()?;
    let name = String::from_utf8_lossy(&name).trim_end_matches('\0').to_owned();
    (!name.is_empty()).then_some(name)
}

/// Whether this connection is MPTCP now: made with `IPPROTO_MPTCP` and not fallen back to
/// TCP (a peer or middlebox that dropped MP_CAPABLE). `false` for plain TCP.
pub fn is_mptcp(fd: &impl AsRawFd) -> bool {
    int_option(fd, libc::IPPROTO_TCP, TCP_IS_MPTCP) == Some(1)
}

/// The subflows an MPTCP connection has besides its first (`mptcpi_subflows`, the first
/// byte of `struct mptcp_info`; the kernel copies as much of the struct as it is asked
/// for); `None` if this is not an MPTCP connection.
pub fn mptcp_extra_subflows(fd: &impl AsRawFd) -> Option<u8> {
    let mut info = [0u8; 4];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` (4) bytes into `info`, which lives across the
    // call; the descriptor is open for the call's duration.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), SOL_MPTCP, MPTCP_INFO, info.as_mut_ptr() as *mut libc::c_void, &mut len)
    };
    (rc == 0 && len >= 1).then_some(info[0])
}
