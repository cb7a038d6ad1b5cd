//! ECN validation and congestion signals of one path (RFC 9000 §13.4, RFC 9002 §7.1).
//!
//! A path starts by marking a few packets ECT(0). Acknowledgements must then report ECN
//! counts that account for every marked packet they acknowledge; if they do, the path is
//! ECN-capable and every packet is marked, and a growing CE count is a congestion signal.
//! If they do not (a network that bleaches or mangles the codepoint, or a peer that does
//! not report counts), marking stops for good.

use crate::frame::EcnCounts;

/// Packets marked before waiting for validation (RFC 9000 §13.4.2 suggests 10).
const TESTING_PACKETS: u64 = 10;

/// The ECT(0) codepoint as a TOS/traffic-class value.
pub const ECT0: u8 = 0b10;

/// Where validation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcnState {
    /// Marking the first packets.
    Testing,
    /// Testing is over; waiting for an acknowledgement that validates it, without marking.
    Unknown,
    /// Validated: every packet is marked.
    Capable,
    /// Validation failed: nothing is marked any more.
    Failed,
}

/// What an acknowledgement's ECN counts mean for the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EcnSignal {
    /// Nothing to do.
    None,
    /// The CE count grew: react as to a loss (RFC 9002 §7.1).
    Congestion {
        /// How many more packets the network marked CE.
        newly_ce: u64,
    },
}

/// ECN state of one path's packet number space.
#[derive(Debug, Clone)]
pub struct EcnValidator {
    state: EcnState,
    /// ECT(0)-marked packets sent.
    sent: u64,
    /// Largest counts the peer reported so far.
    peer: EcnCounts,
    /// The test ends when `sent` reaches this.
    testing_until: u64,
}

impl Default for EcnValidator {
    fn default() -> Self {
        Self {
            state: EcnState::Testing,
            sent: 0,
            peer: EcnCounts { ect0: 0, ect1: 0, ce: 0 },
            testing_until: TESTING_PACKETS,
        }
    }
}

impl EcnValidator {
    /// Where validation stands.
    pub fn state(&self) -> EcnState {
        self.state
    }

    /// Whether the next packets are to be marked ECT(0).
    pub fn should_mark(&self) -> bool {
        matches!(self.state, EcnState::Testing | EcnState::Capable)
    }

    /// The path moved to another network path (a new address on either side): ECN is
    /// validated again there (RFC 9000 §13.4.2), marking from a new test. The counts go on
    /// from where they are: the peer's ECN counts are per packet number space, which the
    /// move keeps, so starting them from zero would take the peer's totals for an
    /// overcount and fail the path at its first acknowledgement.
    pub fn restart(&mut self) {
        self.state = EcnState::Testing;
        self.testing_until = self.sent + TESTING_PACKETS;
    }

    /// A packet marked ECT(0) was sent.
    pub fn on_marked_sent(&mut self) {
        self.sent += 1;
        if self.state == EcnState::Testing && self.sent >= self.testing_until {
            self.state = EcnState::Unknown;
        }
    }

    /// An acknowledgement newly acknowledged `newly_acked_marked` ECT(0)-marked packets
    /// and carried `counts` (None: an ACK frame without ECN counts). RFC 9000 §13.4.2.1.
    pub fn on_ack(&mut self, newly_acked_marked: u64, counts: Option<EcnCounts>) -> EcnSignal {
        if self.state == EcnState::Failed {
            return EcnSignal::None;
        }
        let Some(c) = counts else {
            if newly_acked_marked > 0 {
                self.state = EcnState::Failed;
            }
            return EcnSignal::None;
        };
        let p = self.peer;
        // Counts never go down (a reordered ACK may carry older ones: ignore it), and
        // cannot exceed what we marked; we never send ECT(1).
        if c.ect0 < p.ect0 || c.ect1 < p.ect1 || c.ce < p.ce {
            return EcnSignal::None;
        }
        let overcount = c.ect0.saturating_add(c.ect1).saturating_add(c.ce) > self.sent;
        let grew = (c.ect0 - p.ect0) + (c.ce - p.ce);
        if c.ect1 > 0 || overcount || grew < newly_acked_marked {
            self.state = EcnState::Failed;
            return EcnSignal::None;
        }
        self.peer = c;
        if newly_acked_marked > 0 && matches!(self.state, EcnState::Testing | EcnState::Unknown) {
            self.state = EcnState::Capable;
        }
        match c.ce - p.ce {
            0 => EcnSignal::None,
            newly_ce => EcnSignal::Congestion { newly_ce },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a move (a restart), the peer's counts go on growing from their totals: the path
    /// is tested and validated again, not failed for an apparent overcount.
    #[test]
    fn a_restart_validates_again_against_the_running_counts() {
        let mut v = EcnValidator::default();
        sent(&mut v, 10);
        assert_eq!(v.on_ack(10, counts(10, 0)), EcnSignal::None);
        sent(&mut v, 990);
        assert_eq!(v.on_ack(990, counts(1000, 0)), EcnSignal::None);
        assert_eq!(v.state(), EcnState::Capable);
        v.restart();
        assert_eq!(v.state(), EcnState::Testing);
        sent(&mut v, 10);
        assert_eq!(v.state(), EcnState::Unknown, "a test of 10 packets, not of the totals");
        assert_eq!(v.on_ack(10, counts(1010, 0)), EcnSignal::None);
        assert_eq!(v.state(), EcnState::Capable);
        // A path that failed before the move is tested afresh.
        let mut f = EcnValidator::default();
        sent(&mut f, 10);
        f.on_ack(10, None);
        assert_eq!(f.state(), EcnState::Failed);
        f.restart();
        assert!(f.should_mark());
    }

    fn counts(ect0: u64, ce: u64) -> Option<EcnCounts> {
        Some(EcnCounts { ect0, ect1: 0, ce })
    }

    fn sent(v: &mut EcnValidator, n: u64) {
        for _ in 0..n {
            assert!(v.should_mark());
            v.on_marked_sent();
        }
    }

    #[test]
    fn testing_then_waiting_then_capable() {
        let mut v = EcnValidator::default();
        sent(&mut v, 10);
        assert_eq!(v.state(), EcnState::Unknown);
        assert!(!v.should_mark());
        assert_eq!(v.on_ack(4, counts(4, 0)), EcnSignal::None);
        assert_eq!(v.state(), EcnState::Capable);
        assert!(v.should_mark());
    }

    #[test]
    fn ce_marks_are_congestion_once() {
        let mut v = EcnValidator::default();
        sent(&mut v, 6);
        assert_eq!(v.on_ack(3, counts(3, 0)), EcnSignal::None);
        assert_eq!(v.on_ack(3, counts(4, 2)), EcnSignal::Congestion { newly_ce: 2 });
        // A reordered, older ACK changes nothing.
        assert_eq!(v.on_ack(0, counts(3, 0)), EcnSignal::None);
        assert_eq!(v.state(), EcnState::Capable);
    }

    #[test]
    fn missing_or_short_counts_fail_validation() {
        let mut v = EcnValidator::default();
        sent(&mut v, 3);
        v.on_ack(2, None);
        assert_eq!(v.state(), EcnState::Failed);
        assert!(!v.should_mark());
        // Bleached: the peer saw not-ECT, so its counts do not grow.
        let mut v = EcnValidator::default();
        sent(&mut v, 3);
        v.on_ack(3, counts(0, 0));
        assert_eq!(v.state(), EcnState::Failed);
        // More reported than we ever marked.
        let mut v = EcnValidator::default();
        sent(&mut v, 2);
        v.on_ack(2, counts(5, 0));
        assert_eq!(v.state(), EcnState::Failed);
        // ECT(1), which we never send.
        let mut v = EcnValidator::default();
        sent(&mut v, 2);
        v.on_ack(1, Some(EcnCounts { ect0: 1, ect1: 1, ce: 0 }));
        assert_eq!(v.state(), EcnState::Failed);
    }

    #[test]
    fn acks_of_unmarked_packets_without_counts_are_fine() {
        let mut v = EcnValidator::default();
        v.on_ack(0, None);
        assert_eq!(v.state(), EcnState::Testing);
    }
}
