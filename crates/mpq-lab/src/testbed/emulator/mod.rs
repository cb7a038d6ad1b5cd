//! The link emulator: the simulator's link model ([`mpq_sim::Link`]: rate, queue, delay,
//! jitter, loss, duplication, reordering, MTU, scripted events) applied in real time to the
//! packets the router namespace routes through the paths' TUN devices.
//!
//! - [`core`]: the model driven by a caller's clock (tested against a fake clock and against
//!   the simulator, packet for packet);
//! - [`run`]: the real-time loop around it (TUN devices, the wall clock, the control socket).

pub mod core;
pub mod run;
