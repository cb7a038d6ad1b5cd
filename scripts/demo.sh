#!/usr/bin/env bash
# Builds mpq and runs its main job on loopback: a file download over HTTP/0.9 (hq-interop)
# checked byte for byte, a goodput measurement with `mpq perf`, then one connection over two
# loopback paths (127.0.0.1 and 127.0.0.2) with a thread per path on each side, printing
# what each path carried and what each thread used.
# Usage: scripts/demo.sh [SECONDS]   (perf duration, default 5)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-5}"
cargo build --release --locked -p mpq
bin="$PWD/target/release/mpq"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

wait_listening() { # file
    for _ in $(seq 1 100); do grep -q "listening on" "$1" 2>/dev/null && return 0; sleep 0.05; done
    echo "server did not start" >&2; return 1
}

mkdir -p "$work/www" "$work/out"
head -c 20000000 /dev/urandom > "$work/www/file.bin"
"$bin" server --listen 127.0.0.1:0 --root "$work/www" > "$work/server.log" 2>&1 & pids+=($!)
wait_listening "$work/server.log"
addr=$(sed -n 's/^listening on //p' "$work/server.log")
echo "== download 20 MB from $addr"
"$bin" client "https://$addr/file.bin" --output "$work/out" --insecure
cmp "$work/www/file.bin" "$work/out/file.bin" && echo "download verified byte for byte"

"$bin" perf server --listen 127.0.0.1:0 --mtu 1452 > "$work/perf.log" 2>&1 & pids+=($!)
wait_listening "$work/perf.log"
paddr=$(sed -n 's/^listening on //p' "$work/perf.log")
echo "== mpq perf for ${secs}s against $paddr"
"$bin" perf client --connect "$paddr" --duration "$secs" --mtu 1452

"$bin" perf server --listen 127.0.0.1:0 --mtu 1452 --threads per-path --scheduler round-robin > "$work/perf2.log" 2>&1 & pids+=($!)
wait_listening "$work/perf2.log"
paddr=$(sed -n 's/^listening on //p' "$work/perf2.log")
echo "== one connection over two paths, a thread per path on each side, for ${secs}s against $paddr"
"$bin" perf client --connect "$paddr" --duration "$secs" --mtu 1452 --threads per-path \
    --local 127.0.0.1:0 --local 127.0.0.2:0 --scheduler round-robin
