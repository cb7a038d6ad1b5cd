//! QUIC transport parameters (RFC 9000 §18), plus `max_datagram_frame_size` (RFC 9221 §3),
//! the multipath `initial_max_path_id` (RFC 10069 §2.1), `version_information` (RFC 9368 §3)
//! and `grease_quic_bit` (RFC 9287 §3).
//!
//! [`TransportParameters::decode`] enforces every MUST of RFC 9000 §7.4 and §18.2 that can be
//! checked on the parameters alone, with TRANSPORT_PARAMETER_ERROR. Checks that need the
//! connection's state (e.g. that initial_source_connection_id matches the packet header,
//! RFC 9000 §7.3) are the caller's job.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

use crate::cid::{ConnectionId, MAX_CID_LEN};
use crate::coding::{varint_len, write_varint, Reader};
use crate::error::TransportError;
use crate::types::Side;

/// Transport parameter IDs (RFC 9000 §18.2, RFC 9221 §3, RFC 10069 §2.1).
pub mod id {
    /// original_destination_connection_id (server only).
    pub const ORIGINAL_DESTINATION_CONNECTION_ID: u64 = 0x00;
    /// max_idle_timeout, milliseconds.
    pub const MAX_IDLE_TIMEOUT: u64 = 0x01;
    /// stateless_reset_token (server only).
    pub const STATELESS_RESET_TOKEN: u64 = 0x02;
    /// max_udp_payload_size.
    pub const MAX_UDP_PAYLOAD_SIZE: u64 = 0x03;
    /// initial_max_data.
    pub const INITIAL_MAX_DATA: u64 = 0x04;
    /// initial_max_stream_data_bidi_local.
    pub const INITIAL_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
    /// initial_max_stream_data_bidi_remote.
    pub const INITIAL_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
    /// initial_max_stream_data_uni.
    pub const INITIAL_MAX_STREAM_DATA_UNI: u64 = 0x07;
    /// initial_max_streams_bidi.
    pub const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;
    /// initial_max_streams_uni.
    pub const INITIAL_MAX_STREAMS_UNI: u64 = 0x09;
    /// ack_delay_exponent.
    pub const ACK_DELAY_EXPONENT: u64 = 0x0a;
    /// max_ack_delay, milliseconds.
    pub const MAX_ACK_DELAY: u64 = 0x0b;
    /// disable_active_migration (zero-length).
    pub const DISABLE_ACTIVE_MIGRATION: u64 = 0x0c;
    /// preferred_address (server only).
    pub const PREFERRED_ADDRESS: u64 = 0x0d;
    /// active_connection_id_limit.
    pub const ACTIVE_CONNECTION_ID_LIMIT: u64 = 0x0e;
    /// initial_source_connection_id.
    pub const INITIAL_SOURCE_CONNECTION_ID: u64 = 0x0f;
    /// retry_source_connection_id (server only).
    pub const RETRY_SOURCE_CONNECTION_ID: u64 = 0x10;
    /// max_datagram_frame_size (RFC 9221).
    pub const MAX_DATAGRAM_FRAME_SIZE: u64 = 0x20;
    /// initial_max_path_id (multipath).
    pub const INITIAL_MAX_PATH_ID: u64 = 0x3e;
    /// version_information (RFC 9368 §3).
    pub const VERSION_INFORMATION: u64 = 0x11;
    /// grease_quic_bit (RFC 9287 §3), zero-length.
    pub const GREASE_QUIC_BIT: u64 = 0x2ab2;
    /// mpq's private, zero-length parameter: the sender can use one packet number space for
    /// all paths (the single-space experiment of seed 003; not part of RFC 10069).
    pub const SINGLE_PACKET_NUMBER_SPACE: u64 = 0x4d50_5153;
}

mod version_info;
pub use version_info::VersionInformation;

/// Default max_udp_payload_size (RFC 9000 §18.2).
pub const DEFAULT_MAX_UDP_PAYLOAD_SIZE: u64 = 65527;
/// Default ack_delay_exponent (RFC 9000 §18.2).
pub const DEFAULT_ACK_DELAY_EXPONENT: u64 = 3;
/// Default max_ack_delay in milliseconds (RFC 9000 §18.2).
pub const DEFAULT_MAX_ACK_DELAY: u64 = 25;
/// Default active_connection_id_limit (RFC 9000 §18.2).
pub const DEFAULT_ACTIVE_CONNECTION_ID_LIMIT: u64 = 2;
/// Largest initial_max_streams_* value (RFC 9000 §18.2).
pub const MAX_STREAMS_LIMIT: u64 = 1 << 60;
/// Largest path ID (RFC 10069 §2.1).
pub const MAX_PATH_ID: u64 = (1 << 32) - 1;

/// The server's preferred_address (RFC 9000 §18.2, §9.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreferredAddress {
    /// IPv4 address and port; `None` is sent as all zeros.
    pub address_v4: Option<SocketAddrV4>,
    /// IPv6 address and port; `None` is sent as all zeros.
    pub address_v6: Option<SocketAddrV6>,
    /// Connection ID to use on the preferred address (never zero-length).
    pub connection_id: ConnectionId,
    /// Stateless reset token for `connection_id`.
    pub stateless_reset_token: [u8; 16],
}

impl PreferredAddress {
    fn encoded_len(&self) -> usize {
        4 + 2 + 16 + 2 + 1 + self.connection_id.len() + 16
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let v4 = self.address_v4.unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        out.extend_from_slice(&v4.ip().octets());
        out.extend_from_slice(&v4.port().to_be_bytes());
        let v6 = self.address_v6.unwrap_or(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0));
        out.extend_from_slice(&v6.ip().octets());
        out.extend_from_slice(&v6.port().to_be_bytes());
        out.push(self.connection_id.len() as u8);
        out.extend_from_slice(&self.connection_id);
        out.extend_from_slice(&self.stateless_reset_token);
    }

    fn decode(val: &[u8]) -> Result<Self, TransportError> {
        let bad = |_| malformed("preferred_address");
        let mut r = Reader::new(val);
        let ip4 = Ipv4Addr::from(r.array::<4>().map_err(bad)?);
        let port4 = r.u16().map_err(bad)?;
        let ip6 = Ipv6Addr::from(r.array::<16>().map_err(bad)?);
        let port6 = r.u16().map_err(bad)?;
        let len = usize::from(r.u8().map_err(bad)?);
        // RFC 9000 §18.2: a zero-length connection ID in preferred_address MUST be a
        // TRANSPORT_PARAMETER_ERROR.
        if len == 0 || len > MAX_CID_LEN {
            return Err(TransportError::transport_parameter("invalid preferred_address connection ID length"));
        }
        let connection_id = ConnectionId::new(r.bytes(len).map_err(bad)?);
        let stateless_reset_token = r.array::<16>().map_err(bad)?;
        if !r.is_empty() {
            return Err(malformed("preferred_address"));
        }
        let present4 = !ip4.is_unspecified() || port4 != 0;
        let present6 = !ip6.is_unspecified() || port6 != 0;
        Ok(Self {
            address_v4: present4.then(|| SocketAddrV4::new(ip4, port4)),
            address_v6: present6.then(|| SocketAddrV6::new(ip6, port6, 0, 0)),
            connection_id,
            stateless_reset_token,
        })
    }
}

/// The transport parameters one endpoint advertises (RFC 9000 §18.2).
///
/// [`Default`] gives the RFC defaults, i.e. the values in force for a parameter the peer
/// omitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportParameters {
    /// Destination CID of the client's first Initial (server only).
    pub original_destination_connection_id: Option<ConnectionId>,
    /// Idle timeout in milliseconds; 0 disables it.
    pub max_idle_timeout: u64,
    /// Stateless reset token for the handshake CID (server only).
    pub stateless_reset_token: Option<[u8; 16]>,
    /// Largest UDP payload the endpoint will receive (at least 1200).
    pub max_udp_payload_size: u64,
    /// Initial connection-level flow control limit.
    pub initial_max_data: u64,
    /// Initial limit for locally initiated bidirectional streams.
    pub initial_max_stream_data_bidi_local: u64,
    /// Initial limit for peer-initiated bidirectional streams.
    pub initial_max_stream_data_bidi_remote: u64,
    /// Initial limit for unidirectional streams.
    pub initial_max_stream_data_uni: u64,
    /// Initial number of bidirectional streams the peer may open (at most 2^60).
    pub initial_max_streams_bidi: u64,
    /// Initial number of unidirectional streams the peer may open (at most 2^60).
    pub initial_max_streams_uni: u64,
    /// Exponent for the ACK Delay field (at most 20).
    pub ack_delay_exponent: u64,
    /// Maximum ACK delay in milliseconds (below 2^14).
    pub max_ack_delay: u64,
    /// The endpoint does not support active migration.
    pub disable_active_migration: bool,
    /// Server's preferred address (server only).
    pub preferred_address: Option<PreferredAddress>,
    /// How many connection IDs the endpoint is willing to store (at least 2).
    pub active_connection_id_limit: u64,
    /// Source CID of the endpoint's first Initial.
    pub initial_source_connection_id: Option<ConnectionId>,
    /// Source CID of the server's Retry (server only).
    pub retry_source_connection_id: Option<ConnectionId>,
    /// Largest DATAGRAM frame the endpoint accepts; 0 means DATAGRAM unsupported (RFC 9221).
    pub max_datagram_frame_size: u64,
    /// Multipath: initial maximum path ID; `Some` signals multipath support.
    pub initial_max_path_id: Option<u64>,
    /// The sender's chosen and available versions (RFC 9368 §3); `None` when absent.
    pub version_information: Option<VersionInformation>,
    /// The sender accepts packets with the QUIC Bit (fixed bit) cleared (RFC 9287 §3).
    pub grease_quic_bit: bool,
    /// The sender can use one packet number space for all paths
    /// ([`id::SINGLE_PACKET_NUMBER_SPACE`]).
    pub single_packet_number_space: bool,
}

impl Default for TransportParameters {
    fn default() -> Self {
        Self {
            original_destination_connection_id: None,
            max_idle_timeout: 0,
            stateless_reset_token: None,
            max_udp_payload_size: DEFAULT_MAX_UDP_PAYLOAD_SIZE,
            initial_max_data: 0,
            initial_max_stream_data_bidi_local: 0,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: 0,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: 0,
            ack_delay_exponent: DEFAULT_ACK_DELAY_EXPONENT,
            max_ack_delay: DEFAULT_MAX_ACK_DELAY,
            disable_active_migration: false,
            preferred_address: None,
            active_connection_id_limit: DEFAULT_ACTIVE_CONNECTION_ID_LIMIT,
            initial_source_connection_id: None,
            retry_source_connection_id: None,
            max_datagram_frame_size: 0,
            initial_max_path_id: None,
            version_information: None,
            grease_quic_bit: false,
            single_packet_number_space: false,
        }
    }
}

fn malformed(what: &str) -> TransportError {
    TransportError::transport_parameter(format!("malformed {what}"))
}

fn write_param(out: &mut Vec<u8>, id: u64, val: &[u8]) {
    write_varint(out, id);
    write_varint(out, val.len() as u64);
    out.extend_from_slice(val);
}

fn write_varint_param(out: &mut Vec<u8>, id: u64, v: u64) {
    write_varint(out, id);
    write_varint(out, varint_len(v) as u64);
    write_varint(out, v);
}

/// A varint-valued parameter: the value MUST be exactly one varint.
fn varint_value(val: &[u8]) -> Result<u64, TransportError> {
    let mut r = Reader::new(val);
    match r.varint() {
        Ok(v) if r.is_empty() => Ok(v),
        _ => Err(malformed("integer parameter")),
    }
}

fn cid_value(val: &[u8]) -> Result<ConnectionId, TransportError> {
    ConnectionId::try_from_slice(val).ok_or_else(|| malformed("connection ID parameter"))
}

impl TransportParameters {
    /// Appends the encoded parameters (the body of the quic_transport_parameters TLS
    /// extension), omitting parameters that are absent or equal to their default.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let d = Self::default();
        if let Some(c) = &self.original_destination_connection_id {
            write_param(out, id::ORIGINAL_DESTINATION_CONNECTION_ID, c);
        }
        let ints = [
            (id::MAX_IDLE_TIMEOUT, self.max_idle_timeout, d.max_idle_timeout),
            (id::MAX_UDP_PAYLOAD_SIZE, self.max_udp_payload_size, d.max_udp_payload_size),
            (id::INITIAL_MAX_DATA, self.initial_max_data, 0),
            (id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL, self.initial_max_stream_data_bidi_local, 0),
            (id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE, self.initial_max_stream_data_bidi_remote, 0),
            (id::INITIAL_MAX_STREAM_DATA_UNI, self.initial_max_stream_data_uni, 0),
            (id::INITIAL_MAX_STREAMS_BIDI, self.initial_max_streams_bidi, 0),
            (id::INITIAL_MAX_STREAMS_UNI, self.initial_max_streams_uni, 0),
            (id::ACK_DELAY_EXPONENT, self.ack_delay_exponent, d.ack_delay_exponent),
            (id::MAX_ACK_DELAY, self.max_ack_delay, d.max_ack_delay),
            (id::ACTIVE_CONNECTION_ID_LIMIT, self.active_connection_id_limit, d.active_connection_id_limit),
            (id::MAX_DATAGRAM_FRAME_SIZE, self.max_datagram_frame_size, 0),
        ];
        for (pid, v, default) in ints {
            if v != default {
                write_varint_param(out, pid, v);
            }
        }
        if let Some(t) = &self.stateless_reset_token {
            write_param(out, id::STATELESS_RESET_TOKEN, t);
        }
        if self.disable_active_migration {
            write_param(out, id::DISABLE_ACTIVE_MIGRATION, &[]);
        }
        if let Some(p) = &self.preferred_address {
            write_varint(out, id::PREFERRED_ADDRESS);
            write_varint(out, p.encoded_len() as u64);
            p.encode(out);
        }
        if let Some(c) = &self.initial_source_connection_id {
            write_param(out, id::INITIAL_SOURCE_CONNECTION_ID, c);
        }
        if let Some(c) = &self.retry_source_connection_id {
            write_param(out, id::RETRY_SOURCE_CONNECTION_ID, c);
        }
        if let Some(p) = self.initial_max_path_id {
            write_varint_param(out, id::INITIAL_MAX_PATH_ID, p);
        }
        if let Some(v) = &self.version_information {
            write_varint(out, id::VERSION_INFORMATION);
            write_varint(out, v.encoded_len() as u64);
            v.encode_value(out);
        }
        if self.grease_quic_bit {
            write_param(out, id::GREASE_QUIC_BIT, &[]);
        }
        if self.single_packet_number_space {
            write_param(out, id::SINGLE_PACKET_NUMBER_SPACE, &[]);
        }
    }

    /// Like [`TransportParameters::encode`], then appends a GREASE parameter with the
    /// reserved ID `31 * n + 27` and `value` (RFC 9000 §18.1: reserved parameters "exercise
    /// the requirement that unknown transport parameters be ignored" and have no semantics,
    /// so any value goes). `n` and `value` should come from the endpoint's RNG; `n` is
    /// reduced to keep the ID a valid varint.
    pub fn encode_with_grease(&self, out: &mut Vec<u8>, n: u64, value: &[u8]) {
        self.encode(out);
        write_param(out, 31 * (n % (1 << 32)) + 27, value);
    }

    /// Decodes parameters sent by `sender`.
    ///
    /// Unknown parameters are ignored (RFC 9000 §7.4.2). Every violation is a
    /// TRANSPORT_PARAMETER_ERROR: truncation, malformed values, duplicates (RFC 9000 §7.4),
    /// server-only parameters from a client, and out-of-range values (RFC 9000 §18.2).
    pub fn decode(sender: Side, bytes: &[u8]) -> Result<Self, TransportError> {
        let mut tp = Self::default();
        let mut r = Reader::new(bytes);
        // At most one entry per two input bytes, so bounded by the input size.
        let mut seen = BTreeSet::new();
        while !r.is_empty() {
            let pid = r.varint().map_err(|_| malformed("parameter ID"))?;
            let len = r.varint().map_err(|_| malformed("parameter length"))?;
            let val = r.bytes(usize::try_from(len).unwrap_or(usize::MAX)).map_err(|_| malformed("parameter value"))?;
            // RFC 9000 §7.4: duplicates SHOULD be a TRANSPORT_PARAMETER_ERROR.
            if !seen.insert(pid) {
                return Err(TransportError::transport_parameter(format!("duplicate transport parameter 0x{pid:x}")));
            }
            tp.apply(sender, pid, val)?;
        }
        Ok(tp)
    }

    fn apply(&mut self, sender: Side, pid: u64, val: &[u8]) -> Result<(), TransportError> {
        let server_only = matches!(
            pid,
            id::ORIGINAL_DESTINATION_CONNECTION_ID
                | id::STATELESS_RESET_TOKEN
                | id::PREFERRED_ADDRESS
                | id::RETRY_SOURCE_CONNECTION_ID
        );
        // RFC 9000 §18.2: a server MUST treat receipt of a server-only parameter as a
        // TRANSPORT_PARAMETER_ERROR.
        if server_only && sender == Side::Client {
            return Err(TransportError::transport_parameter(format!("server-only parameter 0x{pid:x} from client")));
        }
        let invalid = |what: &str| Err(TransportError::transport_parameter(format!("invalid {what}")));
        match pid {
            id::ORIGINAL_DESTINATION_CONNECTION_ID => self.original_destination_connection_id = Some(cid_value(val)?),
            id::MAX_IDLE_TIMEOUT => self.max_idle_timeout = varint_value(val)?,
            id::STATELESS_RESET_TOKEN => {
                self.stateless_reset_token = Some(val.try_into().map_err(|_| malformed("stateless_reset_token"))?);
            }
            id::MAX_UDP_PAYLOAD_SIZE => {
                let v = varint_value(val)?;
                // RFC 9000 §18.2: values below 1200 are invalid.
                if v < 1200 {
                    return invalid("max_udp_payload_size");
                }
                self.max_udp_payload_size = v;
            }
            id::INITIAL_MAX_DATA => self.initial_max_data = varint_value(val)?,
            id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL => self.initial_max_stream_data_bidi_local = varint_value(val)?,
            id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE => self.initial_max_stream_data_bidi_remote = varint_value(val)?,
            id::INITIAL_MAX_STREAM_DATA_UNI => self.initial_max_stream_data_uni = varint_value(val)?,
            id::INITIAL_MAX_STREAMS_BIDI | id::INITIAL_MAX_STREAMS_UNI => {
                let v = varint_value(val)?;
                // RFC 9000 §18.2: a value above 2^60 MUST be a TRANSPORT_PARAMETER_ERROR.
                if v > MAX_STREAMS_LIMIT {
                    return invalid("initial_max_streams");
                }
                if pid == id::INITIAL_MAX_STREAMS_BIDI {
                    self.initial_max_streams_bidi = v;
                } else {
                    self.initial_max_streams_uni = v;
                }
            }
            id::ACK_DELAY_EXPONENT => {
                let v = varint_value(val)?;
                // RFC 9000 §18.2: values above 20 are invalid.
                if v > 20 {
                    return invalid("ack_delay_exponent");
                }
                self.ack_delay_exponent = v;
            }
            id::MAX_ACK_DELAY => {
                let v = varint_value(val)?;
                // RFC 9000 §18.2: values of 2^14 or greater are invalid.
                if v >= 1 << 14 {
                    return invalid("max_ack_delay");
                }
                self.max_ack_delay = v;
            }
            id::DISABLE_ACTIVE_MIGRATION => {
                if !val.is_empty() {
                    return Err(malformed("disable_active_migration"));
                }
                self.disable_active_migration = true;
            }
            id::PREFERRED_ADDRESS => self.preferred_address = Some(PreferredAddress::decode(val)?),
            id::ACTIVE_CONNECTION_ID_LIMIT => {
                let v = varint_value(val)?;
                // RFC 9000 §18.2: a value below 2 MUST be a TRANSPORT_PARAMETER_ERROR.
                if v < 2 {
                    return invalid("active_connection_id_limit");
                }
                self.active_connection_id_limit = v;
            }
            id::INITIAL_SOURCE_CONNECTION_ID => self.initial_source_connection_id = Some(cid_value(val)?),
            id::RETRY_SOURCE_CONNECTION_ID => self.retry_source_connection_id = Some(cid_value(val)?),
            id::MAX_DATAGRAM_FRAME_SIZE => self.max_datagram_frame_size = varint_value(val)?,
            id::INITIAL_MAX_PATH_ID => {
                let v = varint_value(val)?;
                // RFC 10069 §2.1: path IDs are at most 2^32-1.
                if v > MAX_PATH_ID {
                    return invalid("initial_max_path_id");
                }
                self.initial_max_path_id = Some(v);
            }
            id::VERSION_INFORMATION => self.version_information = Some(VersionInformation::decode_value(val)?),
            id::GREASE_QUIC_BIT => {
                // RFC 9287 §3: a value that is not empty MUST be a TRANSPORT_PARAMETER_ERROR.
                if !val.is_empty() {
                    return Err(malformed("grease_quic_bit"));
                }
                self.grease_quic_bit = true;
            }
            id::SINGLE_PACKET_NUMBER_SPACE => {
                if !val.is_empty() {
                    return Err(malformed("single_packet_number_space"));
                }
                self.single_packet_number_space = true;
            }
            _ => {} // RFC 9000 §7.4.2: unknown parameters MUST be ignored.
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
