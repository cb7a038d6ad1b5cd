//! The kernel testbed: client, server and router network namespaces joined by N paths,
//! each path's traffic passing through a user-space link emulator that applies the
//! simulator's link model ([`mpq_sim::Link`]) in real time. This kernel has no netem, so
//! delay and loss cannot come from tc. `mpq lab testbed` is its command line;
//! `docs/lab-testbed.md` describes the plumbing, the cleanup guarantees and the limits.
//!
//! - [`spec`]: `--link` (per path, optionally per direction) and `--event`;
//! - [`plan`]: names, addresses and the `ip` steps that build a testbed (pure);
//! - [`state`]: the state file under `/run/mpq-lab` that lets `down` clean up anything;
//! - [`lifecycle`]: `up` (with guaranteed removal on failure or interruption) and `down`;
//! - [`emulator`]: the link model on TUN devices ([`emulator::core`] with any clock,
//!   [`emulator::run`] in real time); [`control`]: its socket (`stats`, run-time events);
//! - [`probe`]: traffic from threads inside the namespaces (RTT, UDP blast and sink, TCP);
//! - [`selfcheck`]: configured against measured RTT, loss and rate;
//! - [`host`] and [`sys`]: the host's tools and the few raw system calls.

pub mod control;
pub mod emulator;
pub mod host;
pub mod lifecycle;
pub mod plan;
pub mod probe;
pub mod selfcheck;
pub mod spec;
pub mod state;
pub mod sys;
