//! Packet number encoding and decoding (RFC 9000 §17.1, Appendix A.2 and A.3).
//!
//! Packet numbers are 62-bit integers sent truncated to 1–4 bytes; the receiver rebuilds the
//! full value from the largest packet number it has received in the same space.

/// Number of bytes (1..=4) to send packet number `pn` with, given the largest packet number
/// the peer has acknowledged in this space (`None` before any acknowledgement).
///
/// RFC 9000 §17.1: the sender uses enough bits to represent more than twice the range of
/// unacknowledged packet numbers, so that the receiver's reconstruction is unambiguous even
/// if the newest acknowledged packet is all it has seen.
pub fn encode_pn_len(pn: u64, largest_acked: Option<u64>) -> usize {
    // RFC 9000 A.2: num_unacked = full_pn - largest_acked (or full_pn + 1 when none).
    let num_unacked = match largest_acked {
        Some(la) => pn.saturating_sub(la).max(1),
        None => pn.saturating_add(1),
    };
    // min_bits = log2(num_unacked) + 1 and num_bytes = ceil(min_bits / 8), on real numbers.
    // With `bits` = floor(log2(n)) + 1: a power of two gives exactly `bits`, anything else a
    // value strictly between `bits` and `bits + 1`.
    let bits = 64 - num_unacked.leading_zeros() as usize;
    let bytes = if num_unacked.is_power_of_two() { bits.div_ceil(8) } else { bits / 8 + 1 };
    bytes.clamp(1, 4)
}

/// Rebuilds a full packet number from its `pn_len`-byte truncation (RFC 9000 Appendix A.3).
///
/// `largest_received` is the largest packet number successfully processed in this packet
/// number space so far (`None` if none), so the expected next number is one more.
pub fn decode_pn(largest_received: Option<u64>, truncated: u64, pn_len: usize) -> u64 {
    debug_assert!((1..=4).contains(&pn_len));
    let expected = largest_received.map_or(0, |l| l + 1);
    let win = 1u64 << (pn_len * 8);
    let hwin = win / 2;
    let mask = win - 1;
    // The candidate closest to `expected` among the values whose low bits match.
    let candidate = (expected & !mask) | (truncated & mask);
    if expected.checked_sub(hwin).is_some_and(|lo| candidate <= lo) && candidate < (1u64 << 62) - win {
        candidate + win
    } else if candidate > expected + hwin && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

/// Writes the low `pn_len` bytes of `pn`, big-endian.
pub fn write_pn(out: &mut Vec<u8>, pn: u64, pn_len: usize) {
    debug_assert!((1..=4).contains(&pn_len));
    out.extend_from_slice(&pn.to_be_bytes()[8 - pn_len..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc9000_a2_encoding_examples() {
        // "if an endpoint has received an acknowledgment for packet 0xabe8b3 and is sending a
        // packet with a number of 0xac5c02, there are 29,519 (0x734f) outstanding packet
        // numbers ... at least 16 bits are required."
        assert_eq!(encode_pn_len(0xac5c02, Some(0xabe8b3)), 2);
        // "... sending a packet with a number of 0xace8fe ... 24 bits are required."
        assert_eq!(encode_pn_len(0xace8fe, Some(0xabe8b3)), 3);
        assert_eq!(encode_pn_len(0, None), 1);
        assert_eq!(encode_pn_len(127, None), 1); // 128 unacked: log2 + 1 = 8 bits
        assert_eq!(encode_pn_len(128, None), 2);
        assert_eq!(encode_pn_len(1 << 40, Some(0)), 4);
    }

    #[test]
    fn rfc9000_a3_decoding_example() {
        assert_eq!(decode_pn(Some(0xa82f30ea), 0x9b32, 2), 0xa82f9b32);
        assert_eq!(decode_pn(None, 0, 1), 0);
        // Wrap-around upwards and downwards.
        assert_eq!(decode_pn(Some(0xff), 0x01, 1), 0x101);
        assert_eq!(decode_pn(Some(0x101), 0xff, 1), 0xff);
    }

    proptest! {
        /// Whatever the receiver's view between largest_acked and pn - 1, the encoding the
        /// sender chose decodes back to the full number.
        #[test]
        fn encode_decode_round_trip(
            la in 0u64..(1 << 40), gap in 1u64..(1 << 20), seen in 0.0f64..1.0
        ) {
            let pn = la + gap;
            let len = encode_pn_len(pn, Some(la));
            let largest_received = la + ((gap - 1) as f64 * seen) as u64;
            let trunc = pn & ((1u64 << (len * 8)) - 1);
            prop_assert_eq!(decode_pn(Some(largest_received), trunc, len), pn);
        }
    }
}
