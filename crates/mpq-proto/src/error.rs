//! Transport error codes (RFC 9000 §20.1, RFC 9001 §4.8; the PATH_ABANDON error codes of
//! RFC 10069 §4.2.1 are in `conn/multipath.rs`) and the error type the core returns when a peer violates the protocol.

use std::fmt;

/// A QUIC transport error code as carried in CONNECTION_CLOSE (type 0x1c).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransportErrorCode(pub u64);

impl TransportErrorCode {
    /// An endpoint closes the connection without error.
    pub const NO_ERROR: Self = Self(0x00);
    /// The endpoint encountered an internal error.
    pub const INTERNAL_ERROR: Self = Self(0x01);
    /// The server refused to accept a new connection.
    pub const CONNECTION_REFUSED: Self = Self(0x02);
    /// Received more data than permitted in advertised data limits.
    pub const FLOW_CONTROL_ERROR: Self = Self(0x03);
    /// Received a frame for a stream identifier that exceeded advertised limits.
    pub const STREAM_LIMIT_ERROR: Self = Self(0x04);
    /// Received a frame for a stream that was not in a state that permitted it.
    pub const STREAM_STATE_ERROR: Self = Self(0x05);
    /// Received a STREAM or RESET_STREAM frame whose final size is inconsistent.
    pub const FINAL_SIZE_ERROR: Self = Self(0x06);
    /// Received a frame that was badly formatted.
    pub const FRAME_ENCODING_ERROR: Self = Self(0x07);
    /// Received transport parameters that were badly formatted or invalid.
    pub const TRANSPORT_PARAMETER_ERROR: Self = Self(0x08);
    /// The peer issued more connection IDs than our active_connection_id_limit.
    pub const CONNECTION_ID_LIMIT_ERROR: Self = Self(0x09);
    /// Detected an error with protocol compliance not covered by a more specific code.
    pub const PROTOCOL_VIOLATION: Self = Self(0x0a);
    /// Received an invalid Retry Token in a client Initial.
    pub const INVALID_TOKEN: Self = Self(0x0b);
    /// The application or application protocol caused the connection to be closed.
    pub const APPLICATION_ERROR: Self = Self(0x0c);
    /// Received more data in CRYPTO frames than can be buffered.
    pub const CRYPTO_BUFFER_EXCEEDED: Self = Self(0x0d);
    /// Detected errors in performing key updates.
    pub const KEY_UPDATE_ERROR: Self = Self(0x0e);
    /// Reached the confidentiality or integrity limit for the AEAD algorithm.
    pub const AEAD_LIMIT_REACHED: Self = Self(0x0f);
    /// No viable network path exists.
    pub const NO_VIABLE_PATH: Self = Self(0x10);
    /// Version negotiation failed or was tampered with (RFC 9368 §4, §10.2).
    pub const VERSION_NEGOTIATION_ERROR: Self = Self(0x11);

    /// A TLS alert: CRYPTO_ERROR is 0x0100 + the alert description (RFC 9001 §4.8).
    pub fn crypto(alert: u8) -> Self {
        Self(0x0100 | u64::from(alert))
    }

    /// The RFC name of the code, when it has one.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x00 => "NO_ERROR",
            0x01 => "INTERNAL_ERROR",
            0x02 => "CONNECTION_REFUSED",
            0x03 => "FLOW_CONTROL_ERROR",
            0x04 => "STREAM_LIMIT_ERROR",
            0x05 => "STREAM_STATE_ERROR",
            0x06 => "FINAL_SIZE_ERROR",
            0x07 => "FRAME_ENCODING_ERROR",
            0x08 => "TRANSPORT_PARAMETER_ERROR",
            0x09 => "CONNECTION_ID_LIMIT_ERROR",
            0x0a => "PROTOCOL_VIOLATION",
            0x0b => "INVALID_TOKEN",
            0x0c => "APPLICATION_ERROR",
            0x0d => "CRYPTO_BUFFER_EXCEEDED",
            0x0e => "KEY_UPDATE_ERROR",
            0x0f => "AEAD_LIMIT_REACHED",
            0x10 => "NO_VIABLE_PATH",
            0x11 => "VERSION_NEGOTIATION_ERROR",
            0x0100..=0x01ff => "CRYPTO_ERROR",
            _ => return None,
        })
    }
}

impl fmt::Debug for TransportErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}(0x{:x})", self.0),
            None => write!(f, "0x{:x}", self.0),
        }
    }
}

impl fmt::Display for TransportErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A protocol violation detected while processing peer input; it closes the connection
/// with a CONNECTION_CLOSE of type 0x1c carrying these fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    /// The error code to send.
    pub code: TransportErrorCode,
    /// Type of the frame that triggered the error, if any (0 when unknown).
    pub frame_type: Option<u64>,
    /// Human-readable reason (sent as the reason phrase; keep it short).
    pub reason: String,
}

impl TransportError {
    /// Builds an error with a code and a reason.
    pub fn new(code: TransportErrorCode, reason: impl Into<String>) -> Self {
        Self { code, frame_type: None, reason: reason.into() }
    }

    /// Records the frame type that caused the error.
    pub fn with_frame(mut self, frame_type: u64) -> Self {
        self.frame_type = Some(frame_type);
        self
    }

    /// Records the frame type that caused the error unless a more precise one (set deeper
    /// down, e.g. by the frame's decoder) is there already.
    pub fn or_frame(self, frame_type: u64) -> Self {
        if self.frame_type.is_none() {
            self.with_frame(frame_type)
        } else {
            self
        }
    }

    /// FRAME_ENCODING_ERROR with a reason.
    pub fn frame_encoding(reason: impl Into<String>) -> Self {
        Self::new(TransportErrorCode::FRAME_ENCODING_ERROR, reason)
    }

    /// PROTOCOL_VIOLATION with a reason.
    pub fn protocol_violation(reason: impl Into<String>) -> Self {
        Self::new(TransportErrorCode::PROTOCOL_VIOLATION, reason)
    }

    /// VERSION_NEGOTIATION_ERROR with a reason (RFC 9368 §4).
    pub fn version_negotiation(reason: impl Into<String>) -> Self {
        Self::new(TransportErrorCode::VERSION_NEGOTIATION_ERROR, reason)
    }

    /// TRANSPORT_PARAMETER_ERROR with a reason.
    pub fn transport_parameter(reason: impl Into<String>) -> Self {
        Self::new(TransportErrorCode::TRANSPORT_PARAMETER_ERROR, reason)
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if let Some(t) = self.frame_type {
            write!(f, " in frame 0x{t:x}")?;
        }
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

impl std::error::Error for TransportError {}
