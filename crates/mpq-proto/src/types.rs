//! Small protocol types: endpoint side, stream direction, stream IDs (RFC 9000 §2.1).

use std::fmt;

/// Which end of the connection this endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The endpoint that opened the connection.
    Client,
    /// The endpoint that accepted it.
    Server,
}

impl Side {
    /// The other side.
    pub fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }

    /// True for the client.
    pub fn is_client(self) -> bool {
        self == Side::Client
    }
}

/// Whether a stream carries data both ways or one way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Bidirectional.
    Bi,
    /// Unidirectional (only the initiator sends).
    Uni,
}

/// A stream ID: the two low bits give initiator and direction (RFC 9000 §2.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The `index`-th stream of the given initiator and direction.
    pub fn new(initiator: Side, dir: Dir, index: u64) -> Self {
        let s = if initiator == Side::Server { 1 } else { 0 };
        let d = if dir == Dir::Uni { 2 } else { 0 };
        StreamId(index << 2 | d | s)
    }

    /// Which side opened the stream.
    pub fn initiator(self) -> Side {
        if self.0 & 1 == 0 {
            Side::Client
        } else {
            Side::Server
        }
    }

    /// The stream's direction.
    pub fn dir(self) -> Dir {
        if self.0 & 2 == 0 {
            Dir::Bi
        } else {
            Dir::Uni
        }
    }

    /// Position among the streams of the same initiator and direction.
    pub fn index(self) -> u64 {
        self.0 >> 2
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_id_bits() {
        for (side, dir, idx) in [
            (Side::Client, Dir::Bi, 0),
            (Side::Server, Dir::Bi, 7),
            (Side::Client, Dir::Uni, 3),
            (Side::Server, Dir::Uni, 1),
        ] {
            let id = StreamId::new(side, dir, idx);
            assert_eq!((id.initiator(), id.dir(), id.index()), (side, dir, idx));
        }
        assert_eq!(StreamId::new(Side::Server, Dir::Uni, 1).0, 7);
    }
}

/// The encryption level a packet is protected at, which is also its packet type family
/// (RFC 9000 §12.3, RFC 9001 §4). Frame permissions (RFC 9000 §12.4, table 3) depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Initial packets.
    Initial,
    /// 0-RTT packets.
    ZeroRtt,
    /// Handshake packets.
    Handshake,
    /// 1-RTT (short header) packets.
    OneRtt,
}

/// A packet number space (RFC 9000 §12.3). 0-RTT and 1-RTT share the application data
/// space; with multipath, each path ID has its own application data space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpaceId {
    /// Initial packets.
    Initial,
    /// Handshake packets.
    Handshake,
    /// 0-RTT and 1-RTT packets.
    Data,
}

impl Level {
    /// The packet number space packets of this level use.
    pub fn space(self) -> SpaceId {
        match self {
            Level::Initial => SpaceId::Initial,
            Level::Handshake => SpaceId::Handshake,
            Level::ZeroRtt | Level::OneRtt => SpaceId::Data,
        }
    }
}
