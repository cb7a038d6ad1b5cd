//! The endpoint's side of a sharded runtime: several endpoints, each on a thread of its own,
//! share one UDP port (SO_REUSEPORT), and the kernel hands each datagram to one of them by
//! a hash of its addresses. A connection stays with the shard that accepted it, but its
//! other paths (multipath) or a new address after NAT rebinding may hash to another shard.
//! Each shard's connection IDs start with the shard's index
//! ([`EndpointConfig::cid_prefix`](super::EndpointConfig::cid_prefix)), so the shard that
//! receives such a datagram can tell which shard owns it and pass it on.

use crate::packet::header::peek_dcid;
use crate::packet::version;
use crate::packet::PacketKind;

use super::Endpoint;

impl Endpoint {
    /// The shard (the [`EndpointConfig::cid_prefix`](super::EndpointConfig::cid_prefix) of
    /// another endpoint) that owns `datagram`, if it is not this one's: this endpoint uses
    /// prefixes, has no connection the datagram's destination CID routes to, and that CID
    /// carries another prefix.
    ///
    /// Only packets whose destination CID the receiver chose are considered: short headers
    /// and Handshake packets. An Initial or 0-RTT packet carries the client's choice, and
    /// stays with the shard the kernel picked (which then owns the new connection).
    pub fn cid_owner(&self, datagram: &[u8]) -> Option<u8> {
        let own = self.config.cid_prefix?;
        let first = *datagram.first()?;
        if first & 0x80 != 0 {
            let v = u32::from_be_bytes(datagram.get(1..5)?.try_into().ok()?);
            if !version::is_implemented(v) || version::long_kind(v, (first >> 4) & 0x03) != PacketKind::Handshake {
                return None;
            }
        }
        let dcid = peek_dcid(datagram, self.config.cid_len)?;
        // Our own prefix settles it without a route lookup (this runs for every datagram a
        // shard receives, and the endpoint looks the route up again to deliver it).
        let owner = *dcid.first()?;
        if owner == own || dcid.len() != self.config.cid_len || self.routes.contains_key(&dcid) {
            return None;
        }
        Some(owner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::conn::TransportConfig;
    use crate::endpoint::{Endpoint, EndpointConfig};
    use crate::testing::{configs, Pair};

    fn endpoint(prefix: Option<u8>, server: bool) -> Endpoint {
        let mut c = EndpointConfig::with_seed(7);
        c.cid_prefix = prefix;
        Endpoint::new(c, server.then(|| configs(TransportConfig::default()).1))
    }

    /// Every CID a sharded server issues (the handshake's and those of NEW_CONNECTION_ID and
    /// PATH_NEW_CONNECTION_ID frames) starts with its prefix, so another shard names it as
    /// the owner of any packet sent to them.
    #[test]
    fn a_sharded_servers_connection_ids_all_name_it() {
        let (cc, sc) = configs(TransportConfig { initial_max_path_id: Some(3), ..TransportConfig::default() });
        let mut pair = Pair::from_configs(&cc, sc.clone());
        let mut config = EndpointConfig::with_seed(2);
        config.cid_prefix = Some(4);
        pair.server = Endpoint::new(config, Some(sc));
        let h = pair.client_conn;
        assert!(pair.run_until(Duration::from_secs(2), |p| p
            .client
            .connection(h)
            .is_some_and(|c| c.is_established() && c.is_multipath())));
        pair.run_until(Duration::from_millis(200), |_| false);
        let server_conn = pair.server.handles()[0];
        let odcid = pair.server.connection(server_conn).unwrap().orig_dst_cid();
        let cids: Vec<_> = pair.server.routes.keys().filter(|c| **c != odcid).copied().collect();
        assert!(cids.len() > 2, "the server issued more CIDs than its first: {cids:?}");
        let other = endpoint(Some(1), true);
        for cid in cids {
            assert_eq!(cid[0], 4, "{cid:?}");
            let mut short = vec![0x40u8];
            short.extend_from_slice(&cid);
            short.extend_from_slice(&[0; 30]);
            assert_eq!(other.cid_owner(&short), Some(4));
            assert_eq!(pair.server.cid_owner(&short), None, "a connection's own shard keeps it");
        }
    }

    #[test]
    fn issued_cids_carry_the_prefix() {
        let mut ep = endpoint(Some(3), false);
        let now = crate::Instant::ZERO;
        let h = ep
            .connect(now, &configs(TransportConfig::default()).0, "127.0.0.1:4433".parse().unwrap(), "localhost")
            .unwrap();
        let mut buf = Vec::new();
        let t = ep.poll_transmit(now, &mut buf).unwrap();
        // Client Initial: DCID (random, the client's choice for the server), then SCID (ours).
        let d = &buf[..t.size];
        let dcid_len = usize::from(d[5]);
        let scid = &d[7 + dcid_len..7 + dcid_len + usize::from(d[6 + dcid_len])];
        assert_eq!(scid[0], 3);
        assert!(ep.connection(h).is_some());
    }

    #[test]
    fn short_headers_for_another_shard_are_named() {
        let ep = endpoint(Some(1), true);
        let mut short = vec![0x40u8];
        short.extend_from_slice(&[2, 9, 9, 9, 9, 9, 9, 9]);
        short.extend_from_slice(&[0; 30]);
        assert_eq!(ep.cid_owner(&short), Some(2));
        // Our own prefix (a CID we do not know, e.g. of a connection that ended): ours.
        short[1] = 1;
        assert_eq!(ep.cid_owner(&short), None);
        // Without prefixes there are no shards.
        short[1] = 2;
        assert_eq!(endpoint(None, true).cid_owner(&short), None);
        // Too short to hold a CID: ours to drop.
        assert_eq!(ep.cid_owner(&short[..4]), None);
    }

    #[test]
    fn initials_stay_and_handshakes_move() {
        let ep = endpoint(Some(0), true);
        let long = |first: u8, version: u32| {
            let mut d = vec![first];
            d.extend_from_slice(&version.to_be_bytes());
            d.push(8);
            d.extend_from_slice(&[5, 1, 1, 1, 1, 1, 1, 1]);
            d.push(0);
            d.extend_from_slice(&[0; 40]);
            d
        };
        // v1: Initial 0b00, 0-RTT 0b01, Handshake 0b10 (RFC 9000 §17.2).
        assert_eq!(ep.cid_owner(&long(0xc0, crate::VERSION_1)), None);
        assert_eq!(ep.cid_owner(&long(0xd0, crate::VERSION_1)), None);
        assert_eq!(ep.cid_owner(&long(0xe0, crate::VERSION_1)), Some(5));
        // v2: Handshake is 0b11 (RFC 9369 §3.2).
        assert_eq!(ep.cid_owner(&long(0xf0, crate::VERSION_2)), Some(5));
        assert_eq!(ep.cid_owner(&long(0xe0, crate::VERSION_2)), None);
        // An unknown version: not ours to route.
        assert_eq!(ep.cid_owner(&long(0xe0, 0x1a2a_3a4a)), None);
    }
}
