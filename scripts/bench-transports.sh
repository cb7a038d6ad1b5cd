#!/usr/bin/env bash
# mpq multipath QUIC against MPTCP+TLS and TCP+TLS over the kernel testbed: the same
# workload (`mpq perf`), the same TLS (rustls), the same emulated links, interleaved.
#
# Builds testbed `xport` with two paths (default 100mbit/20ms/queue=20ms and
# 50mbit/40ms/queue=40ms; LINK0/LINK1 override), then per repetition runs for SECONDS each:
#   quic       mpq perf over both paths (--local on each path's client address)
#   mptcp-tls  TLS over MPTCP: first subflow on path 0, the second joins on path 1
#   tcp-tls    TLS over TCP on path 0 (the faster path alone)
# and prints one line per run: transport, Mbit/s, client CPU, and for MPTCP the subflows
# that joined. The testbed is taken down on exit, whatever happens.
#
# Usage: scripts/bench-transports.sh [SECONDS] [REPS]   (root; MPQ_BIN defaults to
# target/release/mpq)
set -euo pipefail

SECS="${1:-10}"
REPS="${2:-3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MPQ_BIN="${MPQ_BIN:-$HERE/target/release/mpq}"
LINK0="${LINK0:-100mbit/20ms/queue=20ms}"
LINK1="${LINK1:-50mbit/40ms/queue=40ms}"
NAME=xport
C=mpqlab-$NAME-client
S=mpqlab-$NAME-server

[ "$(id -u)" -eq 0 ] || { echo "bench-transports: run as root (network namespaces)" >&2; exit 1; }
[ -x "$MPQ_BIN" ] || { echo "bench-transports: $MPQ_BIN missing (cargo build --release -p mpq)" >&2; exit 1; }

SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  "$MPQ_BIN" lab testbed down --name "$NAME" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

"$MPQ_BIN" lab testbed up --name "$NAME" --link "$LINK0" --link "$LINK1" >/dev/null
echo "testbed: path 0 $LINK0, path 1 $LINK1; $SECS s per run, $REPS repetitions"

# Starts `mpq perf server --transport T` on both server addresses and waits for it to listen.
start_server() {
  local out
  out=$(mktemp)
  ip netns exec "$S" "$MPQ_BIN" perf server --transport "$1" --listen 10.1.2.2:4433 --listen 10.2.2.2:4433 \
    >"$out" 2>/dev/null &
  SERVER_PID=$!
  for _ in $(seq 100); do grep -q listening "$out" && break; sleep 0.05; done
  rm -f "$out"
}

stop_server() {
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}

run() {
  local t=$1
  shift
  start_server "$t"
  ip netns exec "$C" "$MPQ_BIN" perf client --transport "$t" --connect 10.1.2.2:4433 "$@" \
    --duration "$SECS" --json | python3 -c '
import json, sys
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
extra = ""
if r.get("transport") == "mptcp-tls":
    extra = "  mptcp %s, subflows joined %s" % (r["mptcp"], r["mptcp_subflows_joined"])
elif "paths" in r:
    extra = "  paths " + " + ".join("%.1f" % (p["rx_bytes"] * 8 / r["duration_s"] / 1e6) for p in r["paths"])
print("%-10s %7.1f Mbit/s  CPU %4.0f %%%s" % (r.get("transport", "quic"), r["goodput_bps"] / 1e6,
      100 * r["cpu_util"], extra))'
  stop_server
}

for rep in $(seq "$REPS"); do
  echo "repetition $rep"
  run quic --local 10.1.1.2:0 --local 10.2.1.2:0
  run mptcp-tls --local 10.1.1.2:0 --local 10.2.1.2:0
  run tcp-tls --local 10.1.1.2:0
done
