#!/usr/bin/env python3
"""Where the runtime with a thread per path spends its cycles, and what that means for more
cores (issue C2).

One `mpq perf` transfer over N paths (N veth pairs between two network namespaces with
--netns, else N loopback addresses), both ends in the runtime given (default per-path),
both under `perf record -e cpu-clock -g`. Prints:

* both ends' profiles in our categories and in seed 000's (packet I/O, crypto, connection
  management, locking, application), from scripts/perf_categories.py; the regular
  expressions that map symbols to categories are kept there;
* each endpoint's serial fraction: the time its threads held the endpoint's lock (which one
  thread at a time can) over the CPU time of all its threads, from the runtime's own
  accounts (the client's JSON summary, the server's `path thread ended` log lines); and the
  Amdahl projection of speed-up on 2 to 16 cores, S(n) = 1 / (s + (1 - s) / n), next to
  seed 000's measured mcMPQUIC curve.

Usage: scripts/profile_runtime.py [--paths 8] [--duration 8] [--netns] [--runtime per-path]
       [--mpq target/release/mpq] [--out DIR]   (root for --netns and for perf)
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_perf import free_port, known_runtime, mpq_cmds, wait_port  # noqa: E402
from netns_paths import VethPaths  # noqa: E402

# Seed 000 (mcMPQUIC), measured speed-up of one connection over its paths, each path on a
# core: 1.72x at 2 paths, 5x at 10.
SEED000 = {2: 1.72, 10: 5.0}


def amdahl(s, n):
    return 1.0 / (s + (1.0 - s) / n)


def server_accounts(log):
    """(CPU seconds, lock-held seconds) of the server's path threads, from -v log lines."""
    cpu = held = 0.0
    for line in open(log, errors="replace"):
        if "path thread ended" not in line:
            continue
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        c = re.search(r"cpu_s=([0-9.e-]+)", line)
        h = re.search(r"lock_held_s=([0-9.e-]+)", line)
        if c and h:
            cpu += float(c.group(1))
            held += float(h.group(1))
    return cpu, held


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpq", default="target/release/mpq")
    ap.add_argument("--paths", type=int, default=8)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--runtime", default="per-path",
                    help="single, per-path, per-path/N (at most N path threads; per-path/paths: a thread per path) or shard, any of them +pinned"
                    " (every thread pinned to a CPU in turn: --cpus 0,1,...) (default: %(default)s)")
    ap.add_argument("--netns", action="store_true", help="veth pairs between namespaces (root)")
    ap.add_argument("--mtu", type=int, default=1452)
    ap.add_argument("--out", help="keep perf.data and logs here (default: a temporary directory,"
                    " removed at the end unless the run failed)")
    a = ap.parse_args()
    if not known_runtime(a.runtime):
        raise SystemExit(f"--runtime {a.runtime}: single, per-path, per-path/N, per-path/paths or shard, optionally +pinned")
    if not shutil.which("perf"):
        raise SystemExit("perf is not installed (apt-get install linux-perf)")
    if not os.access(a.mpq, os.X_OK):
        raise SystemExit(f"{a.mpq} is not an executable: build it (cargo build --release -p mpq) or pass --mpq")
    out = a.out or tempfile.mkdtemp(prefix="profile-runtime-")
    os.makedirs(out, exist_ok=True)
    try:
        profile(a, out)
    except BaseException:
        # (Keep what a failed run recorded.)
        print(f"\nperf data and logs: {out}", file=sys.stderr)
        raise
    if a.out:
        print(f"\nperf data and logs: {out}")
    else:
        shutil.rmtree(out, ignore_errors=True)


def perf_child(pid, limit_s=10.0):
    """The pid of the process `perf record` (pid `pid`) started, once it has started."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        if children:
            return int(children[0])
        time.sleep(0.01)
    raise SystemExit(f"perf record (pid {pid}) started no server within {limit_s:.0f} s")


def profile(a, out):
    """Profiles one transfer into `out` and prints the report."""
    net = VethPaths(a.paths) if a.netns else None
    port = free_port()
    server, client = mpq_cmds(os.path.abspath(a.mpq), port, a.duration, a.mtu, a.paths, a.runtime, net)
    data = os.path.join(out, "server.perf.data")
    cdata = os.path.join(out, "client.perf.data")

    def recorded(cmd, path):
        # perf runs inside the namespace, around mpq. (--no-buildid-cache: perf would copy
        # the binary into ~/.debug on every run and never remove it.)
        i = cmd.index(os.path.abspath(a.mpq))
        return cmd[:i] + ["perf", "record", "-q", "-N", "-e", "cpu-clock", "-g", "-o", path, "--"] + cmd[i:]

    # -v: the server logs each path thread's account as it ends.
    server = recorded(server, data) + ["-v"]
    client = recorded(client, cdata)
    slog = os.path.join(out, "server.log")
    srv = subprocess.Popen(server, stdout=open(slog, "wb"), stderr=subprocess.STDOUT)
    try:
        # perf's child is the server: wait for the port in its namespace.
        wait_port(perf_child(srv.pid), port)
        res = subprocess.run(client, capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"client failed: {res.stderr[-2000:]}")
        summary = json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        # The server stops cleanly on SIGINT: its path threads have logged their accounts
        # (when the connection closed) before it exits.
        subprocess.run(["pkill", "-INT", "-P", str(srv.pid)])
        try:
            srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
        if net:
            net.close()
    print(f"# {a.runtime} runtime, {a.paths} paths over {'veth pairs' if net else 'loopback'}: "
          f"{summary['goodput_bps'] / 1e9:.2f} Gbit/s\n")
    print("## Profiles (perf record -e cpu-clock -g), shares of each endpoint's samples\n")
    sys.stdout.flush()
    subprocess.run([sys.executable, os.path.join(HERE, "perf_categories.py"), "--markdown", "--seed000",
                    f"server (sender)={data}", f"client (receiver)={cdata}"], check=True)
    threads = summary.get("threads", [])
    ccpu = sum(t["cpu_s"] for t in threads)
    cheld = sum(t.get("lock_held_s", 0.0) for t in threads)
    scpu, sheld = server_accounts(slog)
    print("\n## Serial fraction (lock held / CPU of the endpoint's threads) and Amdahl projection\n")
    rows = [("client (receiver)", ccpu, cheld), ("server (sender, path threads)", scpu, sheld)]
    print("| endpoint | CPU s | lock held s | serial fraction s | " + " | ".join(f"{n} cores" for n in (2, 4, 8, 16))
          + " |")
    print("| --- | --- | --- | --- |" + " --- |" * 4)
    for name, cpu, held in rows:
        s = held / cpu if cpu > 0 else 1.0
        proj = " | ".join(f"{amdahl(s, n):.2f}x" for n in (2, 4, 8, 16))
        print(f"| {name} | {cpu:.2f} | {held:.2f} | {s:.3f} | {proj} |")
    print("\nseed 000's measured mcMPQUIC curve: " + ", ".join(f"{v}x at {k} paths" for k, v in SEED000.items()))


if __name__ == "__main__":
    main()
