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
# quinn's perf reports throughput per completed request: repeat 1 GiB downloads for the run.
"$quinn" client --duration "$secs" --download-size 1G --upload-size 0 --json "$work/quinn.json" 127.0.0.1:4501 \
    > "$work/quinn.txt" 2>&1
python3 - "$mpq_json" "$work/quinn.json" <<'PY'
import json, sys
mpq = json.loads(sys.argv[1])
q = json.load(open(sys.argv[2]))
# Sum the bytes of every interval quinn reports (stream receive throughput).
intervals = q["intervals"]
qbytes = sum(i["sum"]["bytes"] for i in intervals if "sum" in i)
qsecs = sum(i["sum"]["seconds"] for i in intervals if "sum" in i)
qbps = qbytes * 8 / qsecs if qsecs else float("nan")
print(f"mpq:   {mpq['goodput_bps']/1e9:.2f} Gbit/s over {mpq['duration_s']:.1f} s (client CPU {mpq['cpu_util']*100:.0f} %)")
print(f"quinn: {qbps/1e9:.2f} Gbit/s over {qsecs:.1f} s")
print(f"ratio mpq/quinn: {mpq['goodput_bps']/qbps:.2f}")
PY
