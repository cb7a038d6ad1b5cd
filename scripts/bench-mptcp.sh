#!/usr/bin/env bash
# Two-path benchmark: mpq multipath against the kernel's MPTCP, with single-path TCP and
# single-path mpq as baselines, all in the same invocation.
#
# Topology: namespaces mpqb-cli and mpqb-srv joined by two veth pairs on distinct subnets
# (10.101.1.0/24 and 10.101.2.0/24); every veth end is shaped with
#   tc qdisc add dev IF root tbf rate 500mbit burst 125000 latency 5ms
# The namespaces are removed on exit, whatever happens.
# Checks, printed as WARNING lines on stderr (the figures are still printed): the MPTCP run
# really negotiated MPTCP and completed an MP_JOIN, i.e. used two subflows (the server
# namespace's MPTcpExt* counters, read with nstat before and after), and two-path mpq
# reached at least the MPTCP goodput (ratio >= 1).
#
# Usage: scripts/bench-mptcp.sh [SECONDS]   (root; MPQ_BIN defaults to target/release/mpq)
# Needs iperf3 and mptcpize: scripts/setup-bench.sh installs them.
set -euo pipefail

SECS="${1:-10}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MPQ_BIN="${MPQ_BIN:-$HERE/target/release/mpq}"
CLI=mpqb-cli
SRV=mpqb-srv
RATE="${RATE:-500mbit}"
# The veths carry 1500-byte IP packets: 1472 bytes of UDP payload, as TCP uses the full MTU.
MTU_ARGS=(--mtu 1472)

[ "$(id -u)" -eq 0 ] || { echo "bench-mptcp: run as root (network namespaces)" >&2; exit 1; }
command -v iperf3 >/dev/null && command -v mptcpize >/dev/null || "$HERE/scripts/setup-bench.sh"
[ -x "$MPQ_BIN" ] || { echo "bench-mptcp: $MPQ_BIN missing (cargo build --release -p mpq)" >&2; exit 1; }

cleanup() {
    ip netns pids "$SRV" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns pids "$CLI" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$CLI" 2>/dev/null || true
    ip netns del "$SRV" 2>/dev/null || true
}
trap cleanup EXIT
cleanup

ip netns add "$CLI"
ip netns add "$SRV"
for i in 1 2; do
    ip link add "c$i" netns "$CLI" type veth peer name "s$i" netns "$SRV"
    ip -n "$CLI" addr add "10.101.$i.1/24" dev "c$i"
    ip -n "$SRV" addr add "10.101.$i.2/24" dev "s$i"
    ip -n "$CLI" link set "c$i" up
    ip -n "$SRV" link set "s$i" up
    ip netns exec "$CLI" tc qdisc add dev "c$i" root tbf rate "$RATE" burst 125000 latency 5ms
    ip netns exec "$SRV" tc qdisc add dev "s$i" root tbf rate "$RATE" burst 125000 latency 5ms
done
for ns in "$CLI" "$SRV"; do
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.mptcp.enabled=1
    ip -n "$ns" mptcp limits set subflows 2 add_addr_accepted 2
done
# The client announces its second address as an extra subflow.
ip -n "$CLI" mptcp endpoint add 10.101.2.1 dev c2 subflow

json_field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

wait_port() { # ns proto port
    for _ in $(seq 100); do
        if ip netns exec "$1" ss -lnH "-$2" "sport = :$3" | grep -q .; then return 0; fi
        sleep 0.05
    done
    echo "bench-mptcp: nothing listens on $2 port $3" >&2
    return 1
}

iperf_run() { # label, wrapper...
    local label="$1"; shift
    ip netns exec "$SRV" "$@" iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
    wait_port "$SRV" t 5201
    local bps
    bps=$(ip netns exec "$CLI" "$@" iperf3 -c 10.101.1.2 -p 5201 -t "$SECS" -J | json_field "d['end']['sum_received']['bits_per_second']")
    wait
    echo "$label $bps"
}

mpq_run() { # label, client args...
    local label="$1"; shift
    ip netns exec "$SRV" "$MPQ_BIN" perf server --listen 10.101.1.2:4433 --listen 10.101.2.2:4433 "${MTU_ARGS[@]}" >/dev/null 2>&1 &
    local srv=$!
    wait_port "$SRV" u 4433
    local out bps
    out=$(ip netns exec "$CLI" "$MPQ_BIN" perf client --connect 10.101.1.2:4433 --duration "$SECS" --json "${MTU_ARGS[@]}" "$@")
    kill "$srv" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    bps=$(echo "$out" | json_field "d['goodput_bps']")
    echo "$out" | json_field "'  $label: ' + ', '.join(f\"path {p['path_id']}: {p['rx_bytes']} B, {p['lost_packets']} lost\" for p in d['paths'])" >&2
    echo "$label $bps"
}

# MPTCP counters of the server namespace (/proc/net/netstat is per namespace), absolute.
MPTCP_COUNTERS=(MPTcpExtMPCapableSYNRX MPTcpExtMPJoinSynRx MPTcpExtMPJoinAckRx)
mptcp_counters() {
    local c
    for c in "${MPTCP_COUNTERS[@]}"; do
        ip netns exec "$SRV" nstat -asz "$c" 2>/dev/null | awk -v c="$c" '$1 == c {v = $2} END {printf "%d ", v}'
    done
}

# Did the MPTCP run really use MPTCP with a second subflow? (A client without MPTCP falls
# back to plain TCP silently; a missing endpoint or limit leaves one subflow.)
check_mptcp() { # counters before, counters after
    local -a b=($1) a=($2)
    local capable=$(( a[0] - b[0] )) join_syn=$(( a[1] - b[1] )) join_ack=$(( a[2] - b[2] ))
    echo "[bench-mptcp] MPTCP server counters during the run: MP_CAPABLE SYNs $capable, MP_JOIN SYNs $join_syn, MP_JOIN ACKs $join_ack" >&2
    if [ "$capable" -lt 1 ]; then
        echo "[bench-mptcp] WARNING: the MPTCP run negotiated no MPTCP connection (fell back to TCP?)" >&2
    elif [ "$join_ack" -lt 1 ]; then
        echo "[bench-mptcp] WARNING: the MPTCP run used ONE subflow only (no MP_JOIN completed): its figure is not a two-path one" >&2
    elif [ "$join_ack" -lt "$capable" ]; then
        # iperf3 opens two connections (control and data); each should have joined.
        echo "[bench-mptcp] WARNING: $capable MPTCP connections but only $join_ack MP_JOIN completed: the data connection may have had one subflow" >&2
    fi
}

echo "[bench-mptcp] ${SECS}s per run, every veth end shaped to $RATE" >&2
results=()
results+=("$(iperf_run tcp env)")
if command -v nstat >/dev/null; then
    before="$(mptcp_counters)"
    results+=("$(iperf_run mptcp mptcpize run)")
    check_mptcp "$before" "$(mptcp_counters)"
else
    results+=("$(iperf_run mptcp mptcpize run)")
    echo "[bench-mptcp] WARNING: nstat (iproute2) missing: cannot check that MPTCP used two subflows" >&2
fi
results+=("$(mpq_run mpq-1path --no-multipath)")
results+=("$(mpq_run mpq-2path --local 10.101.1.1:0 --local 10.101.2.1:0 --server-addr 10.101.2.2:4433 --path-mode pairs)")

python3 - "${results[@]}" <<'PY'
import sys
rows = [r.split() for r in sys.argv[1:]]
vals = {k: float(v) for k, v in rows}
base = vals["tcp"]
print(f"{'run':<10} {'Gbit/s':>8} {'vs TCP':>8}")
for k, v in vals.items():
    print(f"{k:<10} {v/1e9:8.3f} {v/base:8.2f}")
ratio = vals['mpq-2path'] / vals['mptcp']
print(f"mpq-2path / mptcp = {ratio:.2f}")
if ratio < 1:
    print(f"[bench-mptcp] WARNING: two-path mpq reached only {ratio:.2f}x the MPTCP goodput (target >= 1)",
          file=sys.stderr)
PY
