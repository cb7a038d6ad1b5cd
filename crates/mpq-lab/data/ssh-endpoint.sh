#!/bin/sh
# mpq lab, SSH testbed: runs one endpoint ("$@") on this host, in the current directory (the
# run's), so that the lab can stop and measure it:
#   ./pid      the endpoint's process ID (the lab stops a server with `kill $(cat pid)`);
#   ./samples  the first line CLK_TCK, then every 0.1 s while it runs and once after: "@ SECONDS", the
#              lines of /proc/net/dev prefixed "N " and the stat line of each of its threads
#              prefixed "T ", and the host's per-core lines of /proc/stat prefixed "S "
#              (throughput per interface, CPU per thread and per core);
#   ./cpu      once it ended: the shell's `times` (the second line: CPU of its children);
#   ./started, ./ended  the wall-clock times (seconds) it was started and found ended.
# Exits with the endpoint's status.
date +%s.%N > started
"$@" &
pid=$!
echo "$pid" > pid
(
  getconf CLK_TCK
  # (The last sample is taken once the endpoint is gone: it counts every byte.)
  while :; do
    running=0
    kill -0 "$pid" 2>/dev/null && running=1
    echo "@ $(date +%s.%N)"
    sed 's/^/N /' /proc/net/dev
    sed -n 's/^cpu[0-9]/S &/p' /proc/stat
    for t in /proc/"$pid"/task/*/stat; do
      [ -r "$t" ] && sed 's/^/T /' "$t"
    done
    [ "$running" = 1 ] || break
    sleep 0.1
  done
) > samples 2>/dev/null &
sampler=$!
wait "$pid"
rc=$?
date +%s.%N > ended
# `times` in this shell (not in a pipeline's subshell, whose children's times start at zero).
times > cpu
wait "$sampler"
exit "$rc"
