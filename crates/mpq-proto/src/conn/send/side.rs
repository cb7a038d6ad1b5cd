//! What a path building a batch has of the rest of the connection: [`BatchSide`] (issue
//! C1's send seam, the step before a thread per path).
//!
//! A batch is built either **with the host** (the shared half and the board, under the
//! connection's lock in a runtime with threads: everything connection-wide is at hand), or
//! **alone**: when nothing connection-wide waits (a quiet lease), the batch's ACKs are the
//! path's own, its inbox is empty and the lease already holds the 1-RTT keys, the peer's
//! CID and the stream data for the batch, the path builds, seals and records the whole batch
//! holding nothing of the connection ([`SendHost::try_alone`]). What an alone batch changes
//! for the others (its view on the board, its ACK offer, its qlog events, the sent-packet
//! counters of debug builds) is kept in [`AloneEffects`] and handed over once when the batch
//! returns ([`SendHost::take_back`]). If it needs the shared side (its leased data ran out
//! and more may wait in the stream table), it stops after the packet at hand and the batch
//! goes on with the host.
//!
//! The compiler proves the alone phase reaches no shared state: [`BatchSide::alone`] holds
//! no reference at all, so a path's thread (issue C2) can run it outside the lock.

use std::time::Duration;

use crate::time::Instant;

use super::super::config::TransportConfig;
use super::super::mail::AckCarried;
use super::host::SendHost;

/// The settings a batch reads, copied once per batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchConfig {
    /// Most datagrams in one GSO batch.
    pub max_gso_segments: usize,
    /// Pacing is on.
    pub pacing: bool,
    /// Our ack_delay_exponent (RFC 9000 §18.2).
    pub ack_delay_exponent: u8,
    /// Our max_ack_delay.
    pub max_ack_delay: Duration,
    /// Most ranges in one ACK frame.
    pub max_ack_ranges: usize,
    /// qlog is on: a batch built alone records its events for the sink.
    pub qlog: bool,
}

impl BatchConfig {
    /// The batch settings of `config`, with qlog on if `qlog`.
    pub fn of(config: &TransportConfig, qlog: bool) -> Self {
        Self {
            max_gso_segments: config.max_gso_segments.max(1),
            pacing: config.pacing,
            ack_delay_exponent: config.ack_delay_exponent,
            max_ack_delay: config.max_ack_delay,
            max_ack_ranges: config.max_ack_ranges.max(1),
            qlog,
        }
    }
}

/// What a batch built alone did that the rest of the connection must learn when it returns.
#[derive(Debug, Default)]
pub(crate) struct AloneEffects {
    /// Packets were sent: the path's view (flight, data sent) is republished.
    pub sent: bool,
    /// The path's ACK state changed: its ACK offer is republished.
    pub offer_changed: bool,
    /// Other paths' ACKs it carried, by the owner's slot, to be posted.
    pub carried: Vec<(usize, AckCarried)>,
    /// Packets sealed under the lease (debug builds' touch counters).
    pub leased_packets: u64,
    /// qlog events the path recorded (time, name, data), for the sink, in order.
    pub qlog: Vec<(Instant, &'static str, serde_json::Value)>,
    /// The batch needed the shared side (more stream data may wait in the stream table):
    /// it stopped, and goes on with the host.
    pub needs_host: bool,
}

/// The rest of the connection as a path building a batch sees it: the host, or nothing.
pub(crate) struct BatchSide<'h, 'a> {
    host: Option<&'h mut SendHost<'a>>,
    slot: usize,
    cfg: BatchConfig,
    /// What an alone batch leaves for the host (always empty with the host).
    pub alone: AloneEffects,
}

impl<'h, 'a> BatchSide<'h, 'a> {
    /// A batch built with the host.
    pub fn with_host(host: &'h mut SendHost<'a>) -> Self {
        let (slot, cfg) = (host.slot, BatchConfig::of(host.config(), host.shared.qlog.is_some()));
        Self { host: Some(host), slot, cfg, alone: AloneEffects::default() }
    }

    /// A batch built alone by the path in `slot`.
    pub fn alone(slot: usize, cfg: BatchConfig) -> Self {
        Self { host: None, slot, cfg, alone: AloneEffects::default() }
    }

    /// The host, unless the batch is built alone.
    pub fn host(&mut self) -> Option<&mut SendHost<'a>> {
        self.host.as_deref_mut()
    }

    /// The host, read-only, unless the batch is built alone.
    pub fn host_ref(&self) -> Option<&SendHost<'a>> {
        self.host.as_deref()
    }

    /// The building path's slot.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The batch's settings.
    pub fn cfg(&self) -> &BatchConfig {
        &self.cfg
    }

    /// Built alone, the batch needs the shared side to go on (it stops after the packet at
    /// hand).
    pub fn needs_host(&mut self) {
        if self.host.is_none() {
            self.alone.needs_host = true;
        }
    }
}
