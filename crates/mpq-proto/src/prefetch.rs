//! Asking the cache ahead for the place a copy will write (issue C2).
//!
//! A store to a line that is not in the core's cache waits for the line; stores leave the
//! store buffer in order, so a copy into cold lines also holds back every later load that
//! must wait for an earlier store (a move of a record just written, wider than the stores
//! that wrote it). Both ends' packet paths copy stream data into buffers used again a window
//! of data later: the receiver into its run buffers (`conn/recv_arena.rs`), the sender into
//! its datagram batches (`conn/send/path_packet.rs`). On the 2-vCPU AVX-512 host of December
//! 2026 copying 1,400-byte pieces into 96 kB buffers ran at 35-42 GB/s in the writer's L2,
//! 17 GB/s from L3, and 6 GB/s when the other core had written the buffer last or the
//! buffers cycled through 96 MB. In the receiving path threads' profile the stalled moves
//! were 16 % of the samples. Asked for a piece or two ahead, the lines arrive while the
//! packets before them are encrypted or decrypted (`docs/bench-receive-copies.md`).

/// A cache line.
const LINE: usize = 64;

/// Asks the cache for the lines of `buf`'s spare capacity between offsets `from` and `to`
/// (offsets in the whole buffer; what lies outside the spare capacity is skipped). A hint
/// only: nothing is written, and `buf` is unchanged.
#[allow(unsafe_code)]
pub(crate) fn spare_lines(buf: &mut Vec<u8>, from: usize, to: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let len = buf.len();
        let spare = buf.spare_capacity_mut();
        let to = to.saturating_sub(len).min(spare.len());
        let from = from.saturating_sub(len).min(to);
        let base = spare.as_ptr().cast::<i8>();
        let end = base.wrapping_add(to);
        // From the line holding `from` on.
        let mut at = base.wrapping_add(from);
        at = at.wrapping_sub(at.addr() % LINE);
        while at < end {
            // SAFETY: a prefetch is a hint: it never faults, and it reads or writes nothing
            // the program sees.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at) };
            at = at.wrapping_add(LINE);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (buf, from, to, LINE);
}

/// [`spare_lines`] up to offset `to`, from where the last call left off: `upto` (the offset
/// up to which lines were asked for) advances, so each line is asked for once.
pub(crate) fn spare_lines_up_to(buf: &mut Vec<u8>, upto: &mut usize, to: usize) {
    if to > *upto {
        spare_lines(buf, *upto, to);
        *upto = to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any range, inside the spare capacity or not, leaves the buffer as it was.
    #[test]
    fn a_prefetch_changes_nothing() {
        let mut buf = Vec::with_capacity(5000);
        buf.extend_from_slice(&[7; 100]);
        for (from, to) in
            [(0, 0), (0, 5000), (100, 1600), (3000, 9000), (9000, 100), (99, 101), (usize::MAX, usize::MAX)]
        {
            spare_lines(&mut buf, from, to);
            assert_eq!(buf, vec![7; 100]);
            assert_eq!(buf.capacity(), 5000);
        }
        let mut upto = 0;
        spare_lines_up_to(&mut buf, &mut upto, 1600);
        spare_lines_up_to(&mut buf, &mut upto, 900);
        assert_eq!((upto, &buf[..]), (1600, &[7; 100][..]), "only ever forward");
        let mut empty: Vec<u8> = Vec::new();
        spare_lines(&mut empty, 0, 4096);
        assert!(empty.is_empty());
    }
}
