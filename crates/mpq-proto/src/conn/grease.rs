//! Greasing the QUIC Bit (RFC 9287): once the peer said it accepts packets whose QUIC Bit
//! (the fixed bit, 0x40 of the first byte) is 0, we clear it in some packets at random, so
//! that no middlebox comes to rely on its being set.

use rand::Rng;

use super::path::PathState;
use super::ConnShared;

/// The QUIC Bit (RFC 9000 §17.2, §17.3.1).
const QUIC_BIT: u8 = 0x40;

impl ConnShared {
    /// The peer advertised grease_quic_bit (RFC 9287 §3).
    pub(crate) fn peer_accepts_greased_bit(&self) -> bool {
        self.peer_params.as_ref().is_some_and(|p| p.grease_quic_bit)
    }

    /// A greasing key for a path ([`PathState::grease`]) if the peer accepts greased
    /// packets: randomness from the connection's seeded generator (sans-IO).
    pub(crate) fn grease_key(&mut self) -> Option<u64> {
        self.peer_accepts_greased_bit().then(|| self.rng.random())
    }

    /// Header parsing options: packets with the QUIC Bit cleared are accepted if and only if
    /// we advertised grease_quic_bit (RFC 9287 §3: an endpoint that advertises it "MUST
    /// accept packets with the QUIC Bit set to a value of 0"; without it, RFC 9000 §17.2
    /// says to discard them).
    pub(crate) fn parse_options(&self) -> crate::packet::ParseOptions {
        crate::packet::ParseOptions { allow_grease_quic_bit: self.config.grease_quic_bit }
    }
}

impl PathState {
    /// Clears the QUIC Bit of the first byte of this path's short header packet `pn` half
    /// of the time, when the peer advertised grease_quic_bit. RFC 9287 §3.1: an endpoint that
    /// receives the parameter "SHOULD set the QUIC Bit to an unpredictable value". The bit
    /// is a keyed hash of the packet number under the path's secret key (SplitMix64 over
    /// key ^ pn), unpredictable to anyone without the key. Long header packets keep the
    /// bit: they go out during the handshake, partly before the peer's parameters are known.
    pub(crate) fn grease_quic_bit(&self, first: &mut u8, pn: u64) {
        let Some(key) = self.grease else { return };
        let mut z = (key ^ pn).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        if z & 1 == 1 {
            *first &= !QUIC_BIT;
        }
    }
}
