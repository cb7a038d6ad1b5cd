#!/usr/bin/env bash
# Loopback bulk-transfer benchmark (scripts/bench_perf.py does the work; `--help` there):
# mpq against quinn's perf tool, and mpq over 1, 2 and 4 loopback paths, runs interleaved,
# goodput and CPU seconds per GB (client + server), medians and ratios.
#
# quinn's perf tool is built outside this repository, from a checkout of quinn-rs/quinn:
#   git clone https://github.com/quinn-rs/quinn /somewhere/quinn
#   cd /somewhere/quinn && cargo build --release -p perf   # -> target/release/quinn-perf
#
# Usage: scripts/bench-perf.sh [QUINN_PERF_BIN] [-- bench_perf.py options]
#   e.g. scripts/bench-perf.sh ~/quinn/target/release/quinn-perf -- --reps 3 --duration 15
# Without QUINN_PERF_BIN only the multipath comparison runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
quinn=()
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    quinn=(--quinn "$1")
    shift
fi
[ "${1:-}" = "--" ] && shift
cargo build --release --locked -p mpq >&2
exec python3 scripts/bench_perf.py --mpq target/release/mpq "${quinn[@]}" "$@"
