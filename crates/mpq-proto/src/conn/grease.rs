//! Greasing the QUIC Bit (RFC 9287): once the peer said it accepts packets whose QUIC Bit
//! (the fixed bit, 0x40 of the first byte) is 0, we clear it in some packets at random, so
//! that no middlebox comes to rely on its being set.

use rand::Rng;

use super::ConnShared;

/// The QUIC Bit (RFC 9000 §17.2, §17.3.1).
const QUIC_BIT: u8 = 0x40;

impl ConnShared {
    /// The peer advertised grease_quic_bit (RFC 9287 §3).
    pub(crate) fn peer_accepts_greased_bit(&self) -> bool {
        self.peer_params.as_ref().is_some_and(|p| p.grease_quic_bit)
    }

    /// Clears the QUIC Bit of the first byte of a short header packet being built, half of
    /// the time, if the peer advertised grease_quic_bit. RFC 9287 §3.1: an endpoint that
    /// receives the parameter "SHOULD set the QUIC Bit to an unpredictable value"; the
    /// randomness comes from the connection's seeded generator (sans-IO). Long header
    /// packets keep the bit: they are sent during the handshake, partly before the peer's
    /// transport parameters are known, and a bit that changes only once they are would
    /// tell an observer nothing worth the risk with peers that check it early.
    pub(crate) fn grease_quic_bit(&mut self, first: &mut u8) {
        if self.peer_accepts_greased_bit() && self.rng.random::<bool>() {
            *first &= !QUIC_BIT;
        }
    }

    /// Header parsing options: packets with the QUIC Bit cleared are accepted if and only if
    /// we advertised grease_quic_bit (RFC 9287 §3: an endpoint that advertises it "MUST
    /// accept packets with the QUIC Bit set to a value of 0"; without it, RFC 9000 §17.2
    /// says to discard them).
    pub(crate) fn parse_options(&self) -> crate::packet::ParseOptions {
        crate::packet::ParseOptions { allow_grease_quic_bit: self.config.grease_quic_bit }
    }
}
