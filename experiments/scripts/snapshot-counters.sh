#!/bin/sh
# Pre/post-run script for the SSH testbed (experiments/ssh-paths.yaml): keeps the host's
# network counters (SNMP and extended TCP/UDP/MPTCP statistics, every interface's counters)
# and its UDP buffer limits in the run's logs, before and after the run, so that drops in
# the kernel (UDP receive buffer errors, TCP retransmissions) can be compared with the
# run's figures. The lab sets MPQ_LAB_WHEN (pre or post), MPQ_LAB_ROLE and MPQ_LAB_LOGS
# (copied back to OUT/logs/RUN/ROLE/).
set -e
out="$MPQ_LAB_LOGS/counters-$MPQ_LAB_WHEN.txt"
{
  echo "# $MPQ_LAB_ROLE $(uname -n) $MPQ_LAB_WHEN $MPQ_LAB_RUN"
  cat /proc/net/snmp /proc/net/netstat /proc/net/dev
  echo "rmem_max $(cat /proc/sys/net/core/rmem_max) wmem_max $(cat /proc/sys/net/core/wmem_max)"
} > "$out"
