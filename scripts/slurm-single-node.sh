#!/usr/bin/env bash
# A single-node Slurm on this machine, for `mpq lab submit --slurm` tests: installs Debian's
# slurm-wlm and munge if missing, writes a slurm.conf for this host (one node, localhost,
# 2 CPUs, partition `lab`), and starts munged, slurmctld and slurmd. Idempotent: daemons
# already running are left alone. Everything listens on this machine only.
#
# Usage: scripts/slurm-single-node.sh [start|stop|status]   (default start)
#   stop: ends the daemons this script started (by their pid files).
#
# Slurm runs jobs as the submitting user; the daemons run as root (SlurmUser=root), which a
# throw-away test machine allows and keeps the setup to one script.
set -euo pipefail

CONF_DIR=/etc/slurm
RUN_DIR=/run/mpq-slurm
LOG_DIR=/var/log/mpq-slurm
SPOOL=/var/spool/mpq-slurm
NODE="$(hostname -s)"
CPUS="${MPQ_SLURM_CPUS:-2}"

log() { echo "[slurm-single-node] $*" >&2; }

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null; then
        return
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        log "slurm-wlm and munge are missing and cannot be installed here (needs root and apt-get)"
        exit 1
    fi
    log "installing slurm-wlm and munge (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends slurm-wlm munge >/tmp/mpq-slurm-apt.log 2>&1 || {
        apt-get update >>/tmp/mpq-slurm-apt.log 2>&1
        apt-get install -y --no-install-recommends slurm-wlm munge >>/tmp/mpq-slurm-apt.log 2>&1
    } || { tail -5 /tmp/mpq-slurm-apt.log >&2; exit 1; }
}

write_conf() {
    mkdir -p "$CONF_DIR" "$RUN_DIR" "$LOG_DIR" "$SPOOL/ctld" "$SPOOL/d"
    cat >"$CONF_DIR/slurm.conf" <<CONF
# Written by mpq's scripts/slurm-single-node.sh: one node, this host.
ClusterName=mpqlab
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=10
Waittime=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=lab Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
}

start() {
    install
    write_conf
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating a munge key"
        if command -v mungekey >/dev/null; then mungekey --create --force; else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null; fi
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    if ! running /run/munge/munged.pid; then
        log "starting munged"
        runuser -u munge -- /usr/sbin/munged
    fi
    if ! running "$RUN_DIR/slurmctld.pid"; then
        log "starting slurmctld"
        /usr/sbin/slurmctld
    fi
    if ! running "$RUN_DIR/slurmd.pid"; then
        log "starting slurmd"
        /usr/sbin/slurmd
    fi
    # Wait (at most 60 s) for the node to take jobs.
    for _ in $(seq 60); do
        state="$(sinfo -h -n "$NODE" -o %t 2>/dev/null || true)"
        case "$state" in
            idle*|mix*|alloc*) log "ready: node $NODE is $state"; return 0 ;;
            down*|drain*) scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true ;;
        esac
        sleep 1
    done
    log "the node did not become idle within 60 s (state: ${state:-none}); logs in $LOG_DIR"
    tail -5 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2 || true
    exit 1
}

stop() {
    for p in "$RUN_DIR/slurmd.pid" "$RUN_DIR/slurmctld.pid" /run/munge/munged.pid; do
        if running "$p"; then
            log "stopping $(basename "$p" .pid)"
            kill "$(cat "$p")"
        fi
    done
}

status() {
    for p in /run/munge/munged.pid "$RUN_DIR/slurmctld.pid" "$RUN_DIR/slurmd.pid"; do
        if running "$p"; then echo "$(basename "$p" .pid): running"; else echo "$(basename "$p" .pid): stopped"; fi
    done
    sinfo 2>/dev/null || true
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac
