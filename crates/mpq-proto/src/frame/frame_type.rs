//! Wire values of the frame types (RFC 9000 §19, RFC 9221 §4, RFC 10069 §4).

/// PADDING.
pub const PADDING: u64 = 0x00;
/// PING.
pub const PING: u64 = 0x01;
/// ACK without ECN counts.
pub const ACK: u64 = 0x02;
/// ACK with ECN counts.
pub const ACK_ECN: u64 = 0x03;
/// RESET_STREAM.
pub const RESET_STREAM: u64 = 0x04;
/// STOP_SENDING.
pub const STOP_SENDING: u64 = 0x05;
/// CRYPTO.
pub const CRYPTO: u64 = 0x06;
/// NEW_TOKEN.
pub const NEW_TOKEN: u64 = 0x07;
/// STREAM with no flag bits; OFF = 0x04, LEN = 0x02, FIN = 0x01 are or-ed in.
pub const STREAM: u64 = 0x08;
/// Largest STREAM type (all flags set).
pub const STREAM_MAX: u64 = 0x0f;
/// MAX_DATA.
pub const MAX_DATA: u64 = 0x10;
/// MAX_STREAM_DATA.
pub const MAX_STREAM_DATA: u64 = 0x11;
/// MAX_STREAMS for bidirectional streams.
pub const MAX_STREAMS_BIDI: u64 = 0x12;
/// MAX_STREAMS for unidirectional streams.
pub const MAX_STREAMS_UNI: u64 = 0x13;
/// DATA_BLOCKED.
pub const DATA_BLOCKED: u64 = 0x14;
/// STREAM_DATA_BLOCKED.
pub const STREAM_DATA_BLOCKED: u64 = 0x15;
/// STREAMS_BLOCKED for bidirectional streams.
pub const STREAMS_BLOCKED_BIDI: u64 = 0x16;
/// STREAMS_BLOCKED for unidirectional streams.
pub const STREAMS_BLOCKED_UNI: u64 = 0x17;
/// NEW_CONNECTION_ID.
pub const NEW_CONNECTION_ID: u64 = 0x18;
/// RETIRE_CONNECTION_ID.
pub const RETIRE_CONNECTION_ID: u64 = 0x19;
/// PATH_CHALLENGE.
pub const PATH_CHALLENGE: u64 = 0x1a;
/// PATH_RESPONSE.
pub const PATH_RESPONSE: u64 = 0x1b;
/// CONNECTION_CLOSE signalling a transport error.
pub const CONNECTION_CLOSE: u64 = 0x1c;
/// CONNECTION_CLOSE signalling an application error.
pub const APPLICATION_CLOSE: u64 = 0x1d;
/// HANDSHAKE_DONE.
pub const HANDSHAKE_DONE: u64 = 0x1e;
/// DATAGRAM without a length field (RFC 9221 §4).
pub const DATAGRAM: u64 = 0x30;
/// DATAGRAM with a length field (RFC 9221 §4).
pub const DATAGRAM_LEN: u64 = 0x31;
/// PATH_ACK without ECN counts (multipath).
pub const PATH_ACK: u64 = 0x3e;
/// PATH_ACK with ECN counts (multipath).
pub const PATH_ACK_ECN: u64 = 0x3f;
/// PATH_ABANDON (multipath).
pub const PATH_ABANDON: u64 = 0x3e75;
/// PATH_STATUS_BACKUP (multipath).
pub const PATH_STATUS_BACKUP: u64 = 0x3e76;
/// PATH_STATUS_AVAILABLE (multipath).
pub const PATH_STATUS_AVAILABLE: u64 = 0x3e77;
/// PATH_NEW_CONNECTION_ID (multipath).
pub const PATH_NEW_CONNECTION_ID: u64 = 0x3e78;
/// PATH_RETIRE_CONNECTION_ID (multipath).
pub const PATH_RETIRE_CONNECTION_ID: u64 = 0x3e79;
/// MAX_PATH_ID (multipath).
pub const MAX_PATH_ID: u64 = 0x3e7a;
/// PATHS_BLOCKED (multipath).
pub const PATHS_BLOCKED: u64 = 0x3e7b;
/// PATH_CIDS_BLOCKED (multipath).
pub const PATH_CIDS_BLOCKED: u64 = 0x3e7c;
