//! Variable-length integers (RFC 9000 §16) and a bounds-checked reader over byte slices.
//!
//! Every parser in the crate reads through [`Reader`], whose methods return
//! [`UnexpectedEnd`] instead of panicking on truncated input.

use thiserror::Error;

/// Largest value a QUIC variable-length integer can carry (2^62 - 1).
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// The input ended before a complete value could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("unexpected end of input")]
pub struct UnexpectedEnd;

/// Number of bytes the varint encoding of `v` takes, or `None` if `v > VARINT_MAX`.
#[inline]
pub fn varint_len(v: u64) -> usize {
    if v < 1 << 6 {
        1
    } else if v < 1 << 14 {
        2
    } else if v < 1 << 30 {
        4
    } else {
        debug_assert!(v <= VARINT_MAX, "varint out of range");
        8
    }
}

/// Appends the varint encoding of `v` to `out`.
///
/// # Panics
/// In debug builds if `v > VARINT_MAX`; callers validate values that come from a peer.
#[inline]
pub fn write_varint(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes());
    } else {
        debug_assert!(v <= VARINT_MAX, "varint out of range");
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

/// Writes `v` as a varint of exactly `len` bytes (1, 2, 4 or 8) into `out[..len]`.
///
/// Used to back-patch length fields whose size was reserved before the value was known.
pub fn write_varint_fixed(out: &mut [u8], v: u64, len: usize) {
    match len {
        1 => {
            debug_assert!(v < 1 << 6);
            out[0] = v as u8;
        }
        2 => {
            debug_assert!(v < 1 << 14);
            out[..2].copy_from_slice(&((v as u16) | 0x4000).to_be_bytes());
        }
        4 => {
            debug_assert!(v < 1 << 30);
            out[..4].copy_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes());
        }
        _ => {
            debug_assert!(len == 8 && v <= VARINT_MAX);
            out[..8].copy_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
        }
    }
}

/// A cursor over a byte slice with bounds-checked reads.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread rest of the input, without consuming it.
    pub fn peek_rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, UnexpectedEnd> {
        let b = *self.buf.get(self.pos).ok_or(UnexpectedEnd)?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads a big-endian u16.
    pub fn u16(&mut self) -> Result<u16, UnexpectedEnd> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Reads a big-endian u32.
    pub fn u32(&mut self) -> Result<u32, UnexpectedEnd> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// Reads a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], UnexpectedEnd> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads `n` bytes as a borrowed slice.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], UnexpectedEnd> {
        let end = self.pos.checked_add(n).ok_or(UnexpectedEnd)?;
        let s = self.buf.get(self.pos..end).ok_or(UnexpectedEnd)?;
        self.pos = end;
        Ok(s)
    }

    /// Consumes and returns everything that is left.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// Reads a variable-length integer (RFC 9000 §16).
    #[inline]
    pub fn varint(&mut self) -> Result<u64, UnexpectedEnd> {
        let first = *self.buf.get(self.pos).ok_or(UnexpectedEnd)?;
        let len = 1usize << (first >> 6);
        let s = self.bytes(len)?;
        let mut v = u64::from(first & 0x3f);
        for b in &s[1..] {
            v = (v << 8) | u64::from(*b);
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc9000_appendix_a1_examples() {
        let cases: [(&[u8], u64); 4] = [
            (&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c], 151_288_809_941_952_652),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, v) in cases {
            assert_eq!(Reader::new(bytes).varint().unwrap(), v);
            let mut out = Vec::new();
            write_varint(&mut out, v);
            assert_eq!(out, bytes);
        }
        // Non-minimal encodings are legal on input.
        assert_eq!(Reader::new(&[0x40, 0x25]).varint().unwrap(), 37);
    }

    #[test]
    fn truncated_inputs_are_errors() {
        assert_eq!(Reader::new(&[]).varint(), Err(UnexpectedEnd));
        assert_eq!(Reader::new(&[0x40]).varint(), Err(UnexpectedEnd));
        assert_eq!(Reader::new(&[0xc0, 0, 0]).varint(), Err(UnexpectedEnd));
        assert_eq!(Reader::new(&[1]).bytes(2), Err(UnexpectedEnd));
        assert_eq!(Reader::new(&[1]).bytes(usize::MAX), Err(UnexpectedEnd));
    }

    proptest! {
        #[test]
        fn varint_round_trip(v in 0..=VARINT_MAX) {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            let mut r = Reader::new(&out);
            prop_assert_eq!(r.varint().unwrap(), v);
            prop_assert!(r.is_empty());
            let mut fixed = [0u8; 8];
            write_varint_fixed(&mut fixed, v, 8);
            prop_assert_eq!(Reader::new(&fixed).varint().unwrap(), v);
        }

        #[test]
        fn varint_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..10)) {
            let _ = Reader::new(&bytes).varint();
        }
    }
}
