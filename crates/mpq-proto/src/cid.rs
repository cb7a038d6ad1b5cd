//! Connection IDs (RFC 9000 §5.1): up to 20 opaque bytes, stored inline.

use std::fmt;

/// Longest connection ID QUIC v1 allows.
pub const MAX_CID_LEN: usize = 20;

/// A connection ID of 0 to 20 bytes, stored inline so that it is `Copy` and never allocates.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ConnectionId {
    len: u8,
    bytes: [u8; MAX_CID_LEN],
}

/// Hashes the ID's bytes only (one write, not the length and all 20 slots): route lookups
/// hash one per datagram. Consistent with `Eq`: equal IDs have equal lengths and bytes.
impl std::hash::Hash for ConnectionId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(&self.bytes[..usize::from(self.len)]);
    }
}

impl ConnectionId {
    /// Builds a connection ID from a slice.
    ///
    /// # Panics
    /// If `b` is longer than [`MAX_CID_LEN`]; use [`ConnectionId::try_from_slice`] for peer input.
    pub fn new(b: &[u8]) -> Self {
        Self::try_from_slice(b).expect("connection ID longer than 20 bytes")
    }

    /// Builds a connection ID from a slice, or `None` if it is longer than 20 bytes.
    pub fn try_from_slice(b: &[u8]) -> Option<Self> {
        if b.len() > MAX_CID_LEN {
            return None;
        }
        let mut bytes = [0u8; MAX_CID_LEN];
        bytes[..b.len()].copy_from_slice(b);
        Some(Self { len: b.len() as u8, bytes })
    }

    /// The zero-length connection ID.
    pub const EMPTY: Self = Self { len: 0, bytes: [0; MAX_CID_LEN] };

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for the zero-length connection ID.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ID's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl std::ops::Deref for ConnectionId {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.as_slice() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert!(ConnectionId::try_from_slice(&[0; 21]).is_none());
        let c = ConnectionId::new(&[1, 2, 3]);
        assert_eq!(c.len(), 3);
        assert_eq!(&*c, &[1, 2, 3]);
        assert_eq!(format!("{c}"), "010203");
        assert!(ConnectionId::EMPTY.is_empty());
    }
}
