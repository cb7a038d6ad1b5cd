#!/usr/bin/env bash
# Installs what scripts/bench-mptcp.sh needs: iperf3, and mptcpize from Debian's mptcpd package.
set -euo pipefail
need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v mptcpize >/dev/null || need+=(mptcpd)
command -v tc >/dev/null || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
    echo "[setup-bench] installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi
echo "[setup-bench] iperf3 $(iperf3 --version | head -1 | awk '{print $2}'), mptcpize $(command -v mptcpize)" >&2
