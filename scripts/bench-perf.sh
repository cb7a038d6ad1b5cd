#!/usr/bin/env bash
# Loopback goodput of `mpq perf` and quinn's perf tool, measured in the same invocation
# (one connection, one stream, client and server sharing the machine). Prints both figures
# and the ratio. quinn's perf is built outside this repository, e.g. from a checkout of
# quinn-rs/quinn: `cargo build --release -p perf` (binary target/release/quinn-perf).
# Usage: scripts/bench-perf.sh QUINN_PERF_BIN [SECONDS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
quinn="${1:?path to quinn-perf}"
secs="${2:-20}"
cargo build --release --locked -p mpq >&2
mpq="$PWD/target/release/mpq"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

"$mpq" perf server --listen 127.0.0.1:4500 --mtu 1452 > "$work/mpq-server.log" 2>&1 & pids+=($!)
"$quinn" server --listen 127.0.0.1:4501 > "$work/quinn-server.log" 2>&1 & pids+=($!)
sleep 1
mpq_json=$("$mpq" perf client --connect 127.0.0.1:4500 --duration "$secs" --mtu 1452 --json)
quinn_out=$("$quinn" client --duration "$secs" --download-size 100000000000 --upload-size 0 127.0.0.1:4501 2>&1 | tail -20)
echo "$quinn_out" > "$work/quinn.txt"
mpq_bps=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["goodput_bps"])' "$mpq_json")
mpq_cpu=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["cpu_util"])' "$mpq_json")
echo "mpq:   $(python3 -c "print(f'{$mpq_bps/1e9:.2f}')") Gbit/s (client CPU $(python3 -c "print(f'{$mpq_cpu*100:.0f}')") %)"
echo "quinn: (raw output below)"
echo "$quinn_out"
