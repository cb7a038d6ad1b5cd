//! A client following the operating system's changes of its local address (RFC 9000 §9:
//! "the client migrates ... on a local address change"): a DHCP lease renewed with another
//! address, an interface that went away. A path sends from the address IP_PKTINFO reported
//! for it; once that address is no longer assigned, every send from it fails and the
//! connection would die at its idle timeout. So every [`CHECK_EVERY`] the client asks the
//! kernel whether each path's local address is still its own (binding a socket to it fails
//! with EADDRNOTAVAIL otherwise) and, for one that is gone, which address the routing table
//! now picks to reach the path's peer (a connected UDP socket's name: no packet is sent).
//! A path on the default socket with no local address of its own sends from whatever
//! address the kernel picks; the watch notes that address at its first check, so that it
//! knows when it goes away (the kernel would silently send from the next one, with the same
//! connection ID, which RFC 9000 §9.5 forbids across local addresses).
//! The path then moves there: without multipath the connection migrates (a new connection
//! ID, RFC 9000 §9.5), with multipath a new path opens from the new address and the old one
//! is abandoned once the new one is validated (RFC 10069).
//!
//! Only paths on a wildcard socket can follow: a socket bound to the address that went away
//! cannot send from another one.
//!
//! The CLI's clients (`mpq client`, `mpq perf client`) and the application API's client
//! connections (`mpq-api`, so `mpq client --http3` too) run a watch per connection; each move
//! is logged at info level (`-v`).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::Duration;

use mpq_proto::conn::{Connection, PathError, PathEvent, PathStatus};
use mpq_proto::Instant;

/// How often the paths' local addresses are checked: two syscalls per path each time.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Whether `ip` is still one of this host's addresses.
pub fn is_assigned(ip: IpAddr) -> bool {
    match UdpSocket::bind(SocketAddr::new(ip, 0)) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::AddrNotAvailable,
    }
}

/// The source address the routing table picks to reach `remote`, if it has a route.
pub fn route_source(remote: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = if remote.is_ipv6() { "[::]:0".parse().ok()? } else { "0.0.0.0:0".parse().ok()? };
    let sock = UdpSocket::bind(any).ok()?;
    sock.connect(remote).ok()?;
    let ip = sock.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// The client's watch over its paths' local addresses.
#[derive(Debug)]
pub struct AddressWatch {
    /// The ports of the client's wildcard sockets: the paths that can follow a change.
    wildcard_ports: Vec<u16>,
    /// The default socket's port, if it is a wildcard socket (paths without a local address).
    default_port: Option<u16>,
    /// Paths without a local address of their own: the source the kernel picked for them.
    sources: BTreeMap<u64, IpAddr>,
    next_check: Option<Instant>,
    /// Multipath: new path ID -> the path it replaces, abandoned once the new one is validated.
    replacing: BTreeMap<u64, u64>,
    /// Paths already being replaced (their address went away).
    replaced: Vec<u64>,
    /// Replacement paths validated since the last poll.
    validated: Vec<u64>,
}

impl AddressWatch {
    /// A watch for a client whose sockets are bound to `bound`.
    pub fn new(bound: &[SocketAddr]) -> Self {
        let wildcard_ports = bound.iter().filter(|a| a.ip().is_unspecified()).map(|a| a.port()).collect();
        let default_port = bound.first().filter(|a| a.ip().is_unspecified()).map(|a| a.port());
        Self {
            wildcard_ports,
            default_port,
            sources: BTreeMap::new(),
            next_check: None,
            replacing: BTreeMap::new(),
            replaced: Vec::new(),
            validated: Vec::new(),
        }
    }

    /// When to check next.
    pub fn timeout(&self) -> Option<Instant> {
        self.next_check.filter(|_| !self.wildcard_ports.is_empty())
    }

    /// A path event: a replacement path validated lets its predecessor go (at the next poll).
    pub fn on_event(&mut self, ev: &PathEvent) {
        if let PathEvent::Validated { id } = ev {
            if self.replacing.contains_key(id) {
                self.validated.push(*id);
            }
        }
    }

    /// Checks the paths' local addresses if due, and moves the paths whose address is gone.
    pub fn poll(&mut self, now: Instant, c: &mut Connection) {
        for id in std::mem::take(&mut self.validated) {
            if let Some(old) = self.replacing.remove(&id) {
                match c.abandon_path(now, old, 0) {
                    Ok(()) => tracing::info!("path {old} abandoned: path {id} replaces it"),
                    Err(e) => tracing::debug!(old, %e, "abandoning the replaced path"),
                }
            }
        }
        if self.wildcard_ports.is_empty() || !c.is_handshake_confirmed() || c.is_closed() {
            return;
        }
        if self.next_check.is_some_and(|t| now < t) {
            return;
        }
        self.next_check = Some(now + CHECK_EVERY);
        for (id, local, remote) in c.path_addresses() {
            if self.replaced.contains(&id) {
                continue;
            }
            let local = match local.filter(|l| !l.ip().is_unspecified()) {
                Some(l) if self.wildcard_ports.contains(&l.port()) => l,
                Some(_) => continue,
                // The kernel picks the source: the one it picked first is the path's.
                None => {
                    let Some(port) = self.default_port else { continue };
                    let Some(ip) = self.sources.get(&id).copied().or_else(|| route_source(remote)) else { continue };
                    self.sources.insert(id, ip);
                    SocketAddr::new(ip, port)
                }
            };
            if is_assigned(local.ip()) {
                continue;
            }
            let Some(ip) = route_source(remote).filter(|ip| *ip != local.ip()) else {
                tracing::debug!(%local, "local address gone, and no other route to the peer yet");
                continue;
            };
            let to = SocketAddr::new(ip, local.port());
            self.follow(now, c, id, local, to, remote);
        }
    }

    fn follow(
        &mut self,
        now: Instant,
        c: &mut Connection,
        id: u64,
        from: SocketAddr,
        to: SocketAddr,
        remote: SocketAddr,
    ) {
        if !c.is_multipath() {
            match c.migrate(now, to) {
                Ok(()) => {
                    self.replaced.push(id);
                    tracing::info!("local address {} is gone: migrated to {to}", from.ip());
                }
                // Retried at the next check.
                Err(PathError::NoConnectionId) => {}
                Err(e) => {
                    self.replaced.push(id);
                    tracing::info!("local address {} is gone, and the connection cannot migrate: {e}", from.ip());
                }
            }
            return;
        }
        match c.open_path(now, Some(to), remote, PathStatus::Available) {
            Ok(new) => {
                self.replaced.push(id);
                self.replacing.insert(new, id);
                tracing::info!("local address {} is gone: path {new} opens from {to} to replace path {id}", from.ip());
            }
            Err(e) => tracing::debug!(%e, "opening a replacement path (retried at the next check)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_assigned_and_a_documentation_address_is_not() {
        assert!(is_assigned("127.0.0.1".parse().expect("ip")));
        // TEST-NET-3 (RFC 5737) is never a host's address.
        assert!(!is_assigned("203.0.113.9".parse().expect("ip")));
    }

    #[test]
    fn the_route_to_loopback_leaves_from_loopback() {
        let ip = route_source("127.0.0.1:9".parse().expect("addr")).expect("a route to loopback");
        assert!(ip.is_loopback(), "{ip}");
    }
}
