#!/usr/bin/env bash
# What idle connections cost an mpq server: bulk goodput with N idle connections held against
# none (same invocation, interleaved runs, medians, ratio) and memory per idle connection.
# Usage: scripts/bench-idle.sh [--idle N] [--reps R] [--duration S]   (see scripts/bench_idle.py --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release --locked -p mpq >&2
exec python3 scripts/bench_idle.py --mpq target/release/mpq "$@"
