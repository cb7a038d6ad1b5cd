#!/usr/bin/env bash
# Runs `mpq lab submit --slurm` against a real single-node Slurm: starts one on this machine
# (scripts/slurm-single-node.sh: installs slurm-wlm and munge from Debian if needed), then the
# ignored test crates/mpq/tests/lab_slurm.rs. Not part of the default test command (it
# installs and starts system daemons).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/slurm-single-node.sh start
cargo test -p mpq --test lab_slurm -- --ignored --nocapture
