//! Reading the client's transport parameters out of a ClientHello before any TLS session
//! exists.
//!
//! A server doing compatible version negotiation picks the negotiated version from the
//! client's `version_information` (RFC 9368 §2.3), and must pick it before it creates its
//! TLS session: the session's keys and the transport parameters it sends (with the Chosen
//! Version) depend on it. This is the small part of a TLS 1.3 ClientHello (RFC 8446 §4.1.2)
//! needed to find the quic_transport_parameters extension (RFC 9001 §8.2). Anything
//! unexpected gives `None`, never a panic: TLS itself checks the message later.

use crate::coding::Reader;

/// TLS handshake message type of a ClientHello (RFC 8446 §4).
const CLIENT_HELLO: u8 = 1;
/// The quic_transport_parameters extension (RFC 9001 §8.2).
const QUIC_TRANSPORT_PARAMETERS: u16 = 0x39;

/// The body of the quic_transport_parameters extension of the ClientHello at the start of
/// `crypto` (the Initial CRYPTO stream from offset 0); `None` if `crypto` holds no complete
/// ClientHello or it has no such extension.
pub fn transport_parameters(crypto: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(crypto);
    if r.u8().ok()? != CLIENT_HELLO {
        return None;
    }
    let [a, b, c] = r.array::<3>().ok()?;
    let len = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
    let mut body = Reader::new(r.bytes(len).ok()?);
    body.bytes(2 + 32).ok()?; // legacy_version, random
    let session_id = usize::from(body.u8().ok()?);
    body.bytes(session_id).ok()?;
    let suites = usize::from(body.u16().ok()?);
    body.bytes(suites).ok()?;
    let compression = usize::from(body.u8().ok()?);
    body.bytes(compression).ok()?;
    let ext_len = usize::from(body.u16().ok()?);
    let mut exts = Reader::new(body.bytes(ext_len).ok()?);
    while !exts.is_empty() {
        let ty = exts.u16().ok()?;
        let len = usize::from(exts.u16().ok()?);
        let data = exts.bytes(len).ok()?;
        if ty == QUIC_TRANSPORT_PARAMETERS {
            return Some(data);
        }
    }
    None
}

/// The Initial CRYPTO stream from offset 0 as far as the CRYPTO frames of one packet cover
/// it without a gap (clients may split and reorder their first flight's frames), given the
/// frames' (offset, data) pairs.
pub fn contiguous_prefix<'a>(frames: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<u8> {
    let mut frames: Vec<(u64, &[u8])> = frames.into_iter().collect();
    frames.sort_by_key(|(o, _)| *o);
    let mut out = Vec::new();
    for (offset, data) in frames {
        let Ok(offset) = usize::try_from(offset) else { break };
        if offset > out.len() {
            break;
        }
        let end = offset.saturating_add(data.len());
        if end > out.len() {
            out.extend_from_slice(&data[out.len() - offset..]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A ClientHello with the given extensions (type, body).
    fn client_hello(exts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.extend_from_slice(&[4, 1, 2, 3, 4]); // session ID
        body.extend_from_slice(&[0, 2, 0x13, 0x01]); // one cipher suite
        body.extend_from_slice(&[1, 0]); // null compression
        let mut e = Vec::new();
        for (ty, data) in exts {
            e.extend_from_slice(&ty.to_be_bytes());
            e.extend_from_slice(&(data.len() as u16).to_be_bytes());
            e.extend_from_slice(data);
        }
        body.extend_from_slice(&(e.len() as u16).to_be_bytes());
        body.extend_from_slice(&e);
        let mut msg = vec![CLIENT_HELLO];
        msg.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        msg.extend_from_slice(&body);
        msg
    }

    #[test]
    fn finds_the_extension_among_others() {
        let ch = client_hello(&[(0x10, b"\x00\x04\x03mpq"), (0x39, &[1, 2, 3]), (0x2b, &[2, 3, 4])]);
        assert_eq!(transport_parameters(&ch), Some(&[1, 2, 3][..]));
        assert_eq!(transport_parameters(&client_hello(&[(0x10, &[0])])), None);
        // Truncated anywhere: no answer, no panic.
        for cut in 0..ch.len() {
            assert_eq!(transport_parameters(&ch[..cut]), None);
        }
    }

    #[test]
    fn reassembles_reordered_frames() {
        let data = b"abcdefgh";
        let frames = [(4u64, &data[4..]), (0, &data[..3]), (2, &data[2..5])];
        assert_eq!(contiguous_prefix(frames), data);
        // A gap stops the prefix.
        assert_eq!(contiguous_prefix([(0u64, &data[..2]), (3, &data[3..])]), b"ab");
        assert_eq!(contiguous_prefix([(u64::MAX, &data[..])]), b"");
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = transport_parameters(&bytes);
        }
    }
}
