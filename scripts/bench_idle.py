#!/usr/bin/env python3
"""What idle connections cost a server: goodput of one bulk transfer with N idle connections
held by the same `mpq perf server` against the same transfer with none, in one invocation,
runs interleaved (0, N, N, 0, 0, N, ...), several repetitions, medians and their ratio; and
the server's memory per idle connection (VmRSS after the N handshakes minus VmRSS before,
divided by N).

Every run starts a fresh server on a loopback port, so no run inherits another's connections.
Usage: scripts/bench_idle.py [--idle N] [--reps R] [--duration S] [--mpq PATH]
(scripts/bench-idle.sh builds the release binary and calls this.)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat(5); the split starts at field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(mpq: str, idle: int, duration: float) -> dict:
    common = ["--mtu", "1452", "--idle-timeout", "600"]
    server = subprocess.Popen(
        [mpq, "perf", "server", "--listen", "127.0.0.1:0", "--max-connections", str(idle + 64), *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = server.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"perf server did not start: {line!r}")
        addr = line.split()[-1]
        rss_before = rss_kib(server.pid)
        client = subprocess.Popen(
            [mpq, "perf", "client", "--connect", addr, "--duration", str(duration), "--json",
             "--idle-connections", str(idle), *common],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        rss_idle = rss_before
        cpu_at_start = cpu_s(server.pid)
        early = []
        if idle > 0:
            # The client says when every idle handshake is done, then starts the bulk transfer.
            for err_line in client.stderr:
                early.append(err_line)
                if err_line.startswith("idle connections:"):
                    rss_idle = rss_kib(server.pid)
                    cpu_at_start = cpu_s(server.pid)
                    break
        out, err = client.communicate(timeout=600)
        if client.returncode != 0:
            tail = "".join(early[-5:]) + err
            raise RuntimeError(f"perf client failed ({client.returncode}): {tail.strip()}")
        result = json.loads(out.strip().splitlines()[-1])
        server_cpu = cpu_s(server.pid) - cpu_at_start
        return {
            "idle": idle,
            "goodput_bps": result["goodput_bps"],
            "duration_s": result["duration_s"],
            "idle_lost": result.get("idle_connections_lost", 0),
            "kib_per_idle": (rss_idle - rss_before) / idle if idle else 0.0,
            "server_cpu_util": server_cpu / max(result["duration_s"], 1e-9),
        }
    finally:
        server.kill()
        server.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle", type=int, default=10_000, help="idle connections in the loaded runs (default 10000)")
    ap.add_argument("--reps", type=int, default=3, help="runs of each kind (default 3)")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of bulk transfer per run (default 5)")
    ap.add_argument("--mpq", default="target/release/mpq", help="mpq binary")
    args = ap.parse_args()
    if not os.access(args.mpq, os.X_OK):
        print(f"error: {args.mpq} is not an executable; build it with cargo build --release -p mpq", file=sys.stderr)
        return 2
    runs = []
    order = []
    for r in range(args.reps):
        order += [0, args.idle] if r % 2 == 0 else [args.idle, 0]
    t0 = time.time()
    for i, n in enumerate(order):
        res = one_run(args.mpq, n, args.duration)
        runs.append(res)
        print(
            f"[{i + 1}/{len(order)} {time.time() - t0:5.0f} s] idle={n:6d}  "
            f"{res['goodput_bps'] / 1e9:6.3f} Gbit/s  server CPU {res['server_cpu_util'] * 100:4.0f} %"
            + (f"  {res['kib_per_idle']:.1f} KiB/idle conn" if n else ""),
            file=sys.stderr,
        )
    base = [r["goodput_bps"] for r in runs if r["idle"] == 0]
    loaded = [r["goodput_bps"] for r in runs if r["idle"] == args.idle]
    mem = [r["kib_per_idle"] for r in runs if r["idle"] == args.idle]
    summary = {
        "idle_connections": args.idle,
        "reps": args.reps,
        "goodput_bps_no_idle": base,
        "goodput_bps_idle": loaded,
        "median_no_idle_bps": statistics.median(base),
        "median_idle_bps": statistics.median(loaded),
        "ratio": statistics.median(loaded) / statistics.median(base),
        "median_kib_per_idle_connection": statistics.median(mem),
        "idle_connections_lost": sum(r["idle_lost"] for r in runs),
    }
    print(json.dumps(summary))
    print(
        f"median goodput: {summary['median_no_idle_bps'] / 1e9:.3f} Gbit/s with no idle connection, "
        f"{summary['median_idle_bps'] / 1e9:.3f} Gbit/s with {args.idle} (ratio {summary['ratio']:.3f}); "
        f"server memory per idle connection {summary['median_kib_per_idle_connection']:.1f} KiB",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
