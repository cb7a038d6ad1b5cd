//! mpq's network lab: experiments described in YAML files, expanded into scenarios by a
//! design (full grid, explicit list, or a WSP space-filling design), run in parallel in the
//! deterministic simulator (the real protocol code in virtual time), with per-run results
//! (JSON lines and CSV), manifests, resumption, sharding and merging. `mpq lab` is its
//! command line; `docs/lab-experiment-files.md` documents the files.
//!
//! - [`experiment`]: a checked experiment file ([`Experiment::load`]); [`file`] is the
//!   schema, [`param`] and [`quantity`] its values, [`locate`] finds a key's line for errors.
//! - [`wsp`] and [`design`]: design points of a class.
//! - [`plan`]: scenarios and runs, with seeds and stable IDs (`plan_variants`: the factors that
//!   repeat runs as variants); [`shard`]: slices of a plan.
//! - [`exec`], [`runner`]: running ([`qlog`]: qlog files per run); [`netns_exec`]: a run on the
//!   kernel testbed (`testbed: netns`; its processes in `netns_process`, a shared bottleneck's
//!   competitor in `netns_competitor`), [`netns_external`] one of another QUIC implementation
//!   ([`implementation`]: the folders of `implementations/`); [`metrics`]: the row of a run
//!   (EBen included);
//!   [`results`], [`csv`], [`manifest`]: the results directory and merging.
//! - [`slurm`]: a plan as a Slurm job array with a dependent merge job.
//! - [`ssh`]: the SSH testbed: runs on two hosts reached over SSH (a hosts file).
//! - [`report`]: the HTML report (plotters figures, tables) of a results directory.
//! - [`testbed`]: the kernel testbed: namespaces joined by paths through a user-space link
//!   emulator that runs the simulator's link model in real time (`mpq lab testbed`).
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use mpq_lab::{experiment::Experiment, plan::Plan};
//!
//! let yaml = "
//! name: example
//! workload: {download: 1MB}
//! design: {type: wsp, points: 4, seed: 7}
//! factors: {initial_path: [0, 1]}
//! topology:
//!   paths:
//!     - {rate: {min: 5mbit, max: 50mbit}, rtt: 20ms, queue: 50ms}
//!     - {rate: 10mbit, rtt: {min: 10ms, max: 100ms}, queue: 50ms}
//! ";
//! let exp = Experiment::from_text(Path::new("example.yaml"), yaml.into()).unwrap();
//! let plan = Plan::new(&exp).unwrap();
//! assert_eq!(plan.scenarios.len(), 4);
//! // Each scenario: a baseline on each path, and a multipath run from each initial path.
//! assert_eq!(plan.scenarios[0].runs.len(), 4);
//! ```

pub mod csv;
pub mod design;
pub mod error;
pub mod exec;
pub mod experiment;
pub mod file;
pub mod handicap;
pub mod ifstats;
pub mod implementation;
pub mod locate;
pub mod manifest;
pub mod metrics;
mod netns_competitor;
pub mod netns_exec;
pub mod netns_external;
mod netns_process;
pub mod param;
pub mod plan;
pub(crate) mod plan_variants;
pub mod profile;
pub mod qlog;
pub mod quantity;
pub mod report;
pub mod results;
pub mod runner;
pub mod shard;
pub mod slurm;
pub mod ssh;
pub mod steering;
pub mod testbed;
pub mod wsp;

pub use error::{FileError, LabError};
pub use experiment::Experiment;
pub use plan::Plan;
