#!/usr/bin/env python3
"""Loopback bulk-transfer benchmark: goodput and CPU per byte, runs interleaved.

Two comparisons, each in ONE invocation so that both sides see the same machine state:

* ``quinn``: ``mpq perf`` against quinn's perf tool (built outside this repository, see
  scripts/bench-perf.sh), one connection, one stream, server to client. Runs alternate
  mpq, quinn, mpq, quinn, ...
* ``paths``: ``mpq perf`` over 1, 2, 4, ... paths of the same loopback (client addresses
  127.0.0.1, 127.0.0.2, ...), the server's scheduler round-robin so that every path carries
  data. Runs alternate 1, 2, 4, 1, 2, 4, ...
* ``runtimes``: the same paths driven by one event loop (``--threads single``), by a
  thread per path up to the CPUs' count (``--threads per-path``; ``per-path/paths`` for a
  thread per path however many, ``per-path/N`` for at most N) and, with ``--kinds single,per-path,shard``, by N
  independent single-path connections on a thread each (``--shard N``, seed 000's
  shardQUIC), the same runtime at both ends, runs alternating single, per-path, shard, ...;
  besides goodput and CPU per GB it reports what share of each endpoint's CPU its path (or
  shard) threads used (the client's from its JSON summary, the server's from
  /proc/PID/task). Over loopback the paths are client addresses 127.0.0.1, 127.0.0.2, ...
  to one server address; with ``--netns`` they are N veth pairs between two network
  namespaces (scripts/netns_paths.py, root needed), path k from 10.77.k.2 to 10.77.k.1.

Every run starts a fresh server. CPU is user + system time of the client (from wait4) plus
the server (from /proc/PID/stat just before it is stopped), divided by the bytes the client
received: CPU seconds per GB (1e9 bytes). The summary gives medians over the repetitions and
ratios of the medians, then each repetition's ratio to the baseline's run next to it (median
and quartiles: the spread says how much to trust a difference). Absolute figures on a shared
2-core machine move from run to run; compare the ratios of one invocation.
"""

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns_paths import VethPaths  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    """User + system CPU seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_cpu(pid):
    """CPU seconds of each thread of a running process, by thread ID: (name, seconds)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = rest.split()
        out[tid] = (head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


class ThreadSampler(threading.Thread):
    """Samples a process's threads every 0.2 s while a run goes on: a path thread ends with
    its path (the client's close ends the server's connection), and its figures are gone from
    /proc after that."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.seen, self.done = pid, {}, threading.Event()

    def run(self):
        while not self.done.wait(0.2):
            self.sample()

    def sample(self):
        try:
            self.seen |= thread_cpu(self.pid)
        except FileNotFoundError:
            pass

    def stop(self):
        """The last sample, then CPU seconds by thread name."""
        self.done.set()
        self.join()
        self.sample()
        out = {}
        for name, secs in self.seen.values():
            out[name] = out.get(name, 0.0) + secs
        return out


def path_share(threads):
    """Share of CPU used by path or shard threads (names mpq-path-N, mpq-shard-K), and each
    one's share."""
    total = sum(threads.values())
    paths = {k: v for k, v in threads.items() if k.startswith(("mpq-path-", "mpq-shard-"))}
    if total <= 0:
        return 0.0, {}
    return sum(paths.values()) / total, {k: v / total for k, v in sorted(paths.items())}


def wait_port(pid, port, timeout=10.0):
    """Waits until UDP `port` is bound in the network namespace of process `pid` (the server)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for table in ("udp", "udp6"):
            try:
                with open(f"/proc/{pid}/net/{table}") as f:
                    if any(line.split()[1].endswith(f":{port:04X}") for line in f.readlines()[1:]):
                        return
            except FileNotFoundError:
                pass
        time.sleep(0.02)
    raise SystemExit(f"server did not bind UDP port {port} within {timeout} s: see its log")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_client(cmd, log):
    """Runs a client to completion; returns (stdout, CPU seconds)."""
    with open(log, "wb") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"client failed ({p.returncode}): {' '.join(cmd)}\n see {log}")
    return out.decode(), ru.ru_utime + ru.ru_stime


def one_run(server_cmd, client_cmd, port, work, tag, parse):
    """Starts a server, runs the client against it, stops the server. Returns a result dict."""
    slog = os.path.join(work, f"{tag}-server.log")
    with open(slog, "wb") as out:
        server = subprocess.Popen(server_cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_port(server.pid, port)
        sampler = ThreadSampler(server.pid)
        sampler.start()
        out, client_cpu = run_client(client_cmd, os.path.join(work, f"{tag}-client.log"))
        server_cpu = proc_cpu(server.pid)
        server_threads = sampler.stop()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    nbytes, secs, extra = parse(out)
    share, per_thread = path_share(server_threads)
    return extra | {
        "server_path_share": share,
        "server_path_threads": per_thread,
        "bytes": nbytes,
        "seconds": secs,
        "gbps": nbytes * 8 / secs / 1e9,
        "client_cpu_s": client_cpu,
        "server_cpu_s": server_cpu,
        "cpu_s_per_gb": (client_cpu + server_cpu) / (nbytes / 1e9),
    }


def parse_mpq(out):
    j = json.loads(out.strip().splitlines()[-1])
    # Paths that carried at least 5 % of the data: the round-robin runs must use them all.
    used = sum(1 for p in j["paths"] if p["rx_bytes"] >= 0.05 * j["bytes"] / max(1, len(j["paths"])))
    def name(t):
        if t["role"] == "path":
            # (A thread that drove several paths, with --path-threads, is named by them all.)
            return "mpq-path-" + ",".join(str(p) for p in t.get("paths") or [t["path_id"]])
        if t["role"] == "shard":
            return "mpq-shard-%d" % t["shard"]
        # (The application's thread: the rest of the client's CPU, since stop 38.)
        return "application" if t["role"] == "application" else "main"
    threads = {name(t): t["cpu_s"] for t in j.get("threads", [])}
    share, per_thread = path_share(threads)
    return j["bytes"], j["duration_s"], {"paths_used": used, "client_path_share": share,
                                         "client_path_threads": per_thread}


def split_runtime(kind):
    """A runtime kind as (runtime, pinned): `per-path/2+pinned` is ("per-path/2", True)
    (a build's mark, `@baseline`, is dropped: `split_build`)."""
    kind, _ = split_build(kind)
    return (kind[: -len("+pinned")], True) if kind.endswith("+pinned") else (kind, False)


def split_build(kind):
    """A runtime kind as (kind, baseline): `per-path@baseline` runs the --mpq-baseline build."""
    return (kind[: -len("@baseline")], True) if kind.endswith("@baseline") else (kind, False)


def known_runtime(kind):
    """Whether `kind` names a runtime: single, per-path, per-path/N (N path threads, or
    `paths` for a thread per path, `cores` the default), shard, optionally +pinned."""
    rt, _ = split_runtime(kind)
    if rt.startswith("per-path/"):
        n = rt[len("per-path/"):]
        return n in ("paths", "cores") or (n.isdigit() and int(n) > 0)
    return rt in ("single", "per-path", "shard")


def mpq_cmds(mpq, port, secs, mtu, paths, runtime="single", net=None, extra=()):
    """Server and client commands: `paths` paths over loopback, or over `net`'s veth pairs;
    `extra` arguments given to both."""
    runtime, pinned = split_runtime(runtime)
    # Every thread pinned, in turn, to one of this machine's CPUs (`--cpus 0,1,...`).
    pin = ["--cpus", ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))] if pinned else []
    if runtime == "shard":
        rt = ["--shard", str(paths)]
    elif runtime.startswith("per-path/"):
        rt = ["--threads", "per-path", "--path-threads", runtime.split("/", 1)[1]]
    else:
        rt = ["--threads", runtime]
    rt += pin
    if net is None:
        listen, connect = [f"127.0.0.1:{port}"], f"127.0.0.1:{port}"
        locals_ = [f"127.0.0.{i + 1}:0" for i in range(paths)] if paths > 1 else []
        others = []
    else:
        listen = [f"{net.server_addr(k)}:{port}" for k in range(1, paths + 1)]
        connect, others = listen[0], listen[1:]
        locals_ = [f"{net.client_addr(k)}:0" for k in range(1, paths + 1)]
    server = [mpq, "perf", "server", "--mtu", str(mtu), *rt, *extra]
    for a in listen:
        server += ["--listen", a]
    client = [mpq, "perf", "client", "--connect", connect, "--duration", str(secs), "--mtu", str(mtu), "--json", *rt, *extra]
    for a in locals_:
        client += ["--local", a]
    for a in others:
        client += ["--server-addr", a]
    if paths > 1:
        server += ["--scheduler", "round-robin"]
        client += ["--scheduler", "round-robin", "--max-paths", str(paths)]
        if net is not None:
            client += ["--path-mode", "pairs"]
    if net is not None:
        server, client = net.in_server(server), net.in_client(client)
    return server, client


def quinn_cmds(quinn, port, secs, work, tag):
    server = [quinn, "server", "--listen", f"127.0.0.1:{port}"]
    out = os.path.join(work, f"{tag}.json")
    client = [quinn, "client", "--duration", str(secs), "--download-size", "1G", "--upload-size", "0",
              "--json", out, f"127.0.0.1:{port}"]

    def parse(_stdout):
        q = json.load(open(out))
        iv = [i["sum"] for i in q["intervals"] if "sum" in i]
        return sum(i["bytes"] for i in iv), sum(i["seconds"] for i in iv), {}

    return server, client, parse


def quartiles(values):
    """(first quartile, median, third quartile) of `values` (inclusive method: with two
    values, their range)."""
    values = list(values)
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def paired_ratios(runs, base_runs, key):
    """Each repetition's ratio to the baseline's run of the same repetition: the runs of one
    repetition are adjacent in time, so the ratio cancels what drifts between repetitions."""
    return [r[key] / b[key] for r, b in zip(runs, base_runs) if b[key] > 0]


def summarise(title, order, results, base):
    print(f"\n== {title}: medians over {len(next(iter(results.values())))} runs")
    print(f"{'':>10} {'Gbit/s':>8} {'CPU-s/GB':>9} {'goodput ratio':>14} {'CPU/GB ratio':>13}   runs (Gbit/s)")
    med = {k: (statistics.median(r["gbps"] for r in v), statistics.median(r["cpu_s_per_gb"] for r in v))
           for k, v in results.items()}
    for k in order:
        g, c = med[k]
        gr, cr = g / med[base][0], c / med[base][1]
        runs = " ".join(f"{r['gbps']:.2f}" for r in results[k])
        print(f"{k:>10} {g:8.2f} {c:9.3f} {gr:14.2f} {cr:13.2f}   {runs}")
    # Paired: how far one repetition's ratio strays from the next (this machine's noise).
    for k in order:
        if k == base or len(results[k]) < 2:
            continue
        gq = quartiles(paired_ratios(results[k], results[base], "gbps"))
        cq = quartiles(paired_ratios(results[k], results[base], "cpu_s_per_gb"))
        print(f"{k:>10} paired with {base}, median (quartiles) of the {len(results[k])} repetitions' ratios:"
              f" goodput {gq[1]:.2f}x ({gq[0]:.2f}-{gq[2]:.2f}), CPU/GB {cq[1]:.2f}x ({cq[0]:.2f}-{cq[2]:.2f})")
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpq", default="target/release/mpq", help="mpq binary (default: %(default)s)")
    ap.add_argument("--quinn", help="quinn-perf binary; without it the quinn comparison is skipped")
    ap.add_argument("--mpq-baseline", help="another mpq binary (e.g. an older build) to run in the quinn"
                    " comparison too, interleaved with the others; without --quinn, mpq against it alone;"
                    " in the runtime comparison, the kinds marked @baseline run it")
    ap.add_argument("--paths", default="1,2,4", help="path counts of the multipath comparison, '' to skip"
                    " (default: %(default)s)")
    ap.add_argument("--runtimes", default="", help="path counts of the runtime comparison (single"
                    " event loop against a thread per path), e.g. 1,2,4; '' to skip (default)")
    ap.add_argument("--kinds", default="single,per-path", help="runtimes compared by --runtimes, the"
                    " first the baseline: single, per-path (path threads up to the CPUs' count),"
                    " per-path/N (at most N path threads: --path-threads N; per-path/paths: a thread"
                    " per path), shard; any of them +pinned (every thread pinned to a CPU"
                    " in turn: --cpus 0,1,...); any of them @baseline to run the --mpq-baseline build,"
                    " e.g. per-path@baseline,per-path (default: %(default)s)")
    ap.add_argument("--netns", action="store_true", help="run the runtime comparison over veth pairs"
                    " between two network namespaces (one per path; root) instead of loopback")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each configuration (default: 3)")
    ap.add_argument("--duration", type=int, default=15, help="seconds per run (default: 15)")
    ap.add_argument("--mtu", type=int, default=1452, help="mpq's UDP payload size (default: 1452)")
    ap.add_argument("--mpq-args", default="", help="more options for both ends of every run of the"
                    " runtime comparison, e.g. '--rcvbuf 1048576' (default: none)")
    ap.add_argument("--json", help="also write every run and the medians to this file")
    ap.add_argument("--logs", help="keep every run's server and client logs in this directory"
                    " (default: a temporary directory, removed at the end unless a run failed)")
    a = ap.parse_args()
    if not os.access(a.mpq, os.X_OK):
        raise SystemExit(f"{a.mpq} is not an executable: build it (cargo build --release -p mpq) or pass --mpq")
    if a.mpq_baseline and not os.access(a.mpq_baseline, os.X_OK):
        raise SystemExit(f"{a.mpq_baseline} is not an executable")
    if a.quinn and not os.access(a.quinn, os.X_OK):
        raise SystemExit(f"{a.quinn} is not an executable: see scripts/bench-perf.sh for how to build it")
    paths = [int(x) for x in a.paths.split(",") if x]
    kinds = [k for k in a.kinds.split(",") if k]
    if not kinds or not all(known_runtime(k) for k in kinds):
        raise SystemExit(f"--kinds {a.kinds}: name runtimes among single, per-path, per-path/N, per-path/paths, shard, each optionally +pinned and @baseline")
    if any(split_build(k)[1] for k in kinds) and not a.mpq_baseline:
        raise SystemExit(f"--kinds {a.kinds}: @baseline runs the --mpq-baseline build: give it")
    runtimes = [int(x) for x in a.runtimes.split(",") if x]
    net = VethPaths(max(runtimes)) if a.netns and runtimes else None
    if a.logs:
        os.makedirs(a.logs, exist_ok=True)
    work = a.logs or tempfile.mkdtemp(prefix="bench-perf-")
    try:
        run_plan(a, paths, kinds, runtimes, net, work)
    except BaseException:
        # (A failed run's message names its log: keep them.)
        print(f"\nlogs: {work}", file=sys.stderr)
        raise
    finally:
        if net:
            net.close()
    if a.logs:
        print(f"\nlogs: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def run_plan(a, paths, kinds, runtimes, net, work):
    """Runs every comparison asked for, interleaved, and prints (and writes) the report."""
    report = {"duration_s": a.duration, "reps": a.reps, "runs": {}, "medians": {}}

    plan = []
    for rep in range(a.reps):
        if a.quinn:
            plan += [("quinn", "mpq", rep), ("quinn", "quinn", rep)]
        # (With kinds marked @baseline, the baseline build is compared there instead.)
        if a.quinn or (a.mpq_baseline and not any(split_build(k)[1] for k in kinds)):
            plan += [("quinn", "mpq", rep)] if not a.quinn else []
            plan += [("quinn", "baseline", rep)] if a.mpq_baseline else []
    for rep in range(a.reps):
        plan += [("paths", f"{n} path" + ("s" if n > 1 else ""), rep) for n in paths]
    for rep in range(a.reps):
        for n in runtimes:
            plan += [("runtimes", f"{n}p {rt}", rep) for rt in kinds]
    results = {"quinn": {}, "paths": {}, "runtimes": {}}
    for i, (group, name, rep) in enumerate(plan):
        port = free_port()
        tag = f"{group}-{name.replace(' ', '').replace('/', '_')}-{rep}"
        if name == "quinn":
            s, c, parse = quinn_cmds(a.quinn, port, a.duration, work, tag)
        elif group == "runtimes":
            n, rt = name.split()
            build = a.mpq_baseline if split_build(rt)[1] else a.mpq
            s, c = mpq_cmds(build, port, a.duration, a.mtu, int(n[:-1]), rt, net, shlex.split(a.mpq_args))
            parse = parse_mpq
        else:
            n = 1 if group == "quinn" else int(name.split()[0])
            s, c = mpq_cmds(a.mpq_baseline if name == "baseline" else a.mpq, port, a.duration, a.mtu, n)
            parse = parse_mpq
        print(f"[{i + 1}/{len(plan)}] {group}: {name}, run {rep + 1} ...", end=" ", flush=True, file=sys.stderr)
        r = one_run(s, c, port, work, tag, parse)
        used = f", {r['paths_used']} paths carried data" if group != "quinn" else ""
        if group == "runtimes" and "single" not in name:
            used += f", path/shard threads {100 * r['client_path_share']:.0f} % of the client's CPU," \
                    f" {100 * r['server_path_share']:.0f} % of the server's"
        print(f"{r['gbps']:.2f} Gbit/s, {r['cpu_s_per_gb']:.3f} CPU-s/GB{used}", file=sys.stderr)
        results[group].setdefault(name, []).append(r)

    if results["quinn"]:
        order = [k for k in ["mpq", "baseline", "quinn"] if k in results["quinn"]]
        against = "quinn" if "quinn" in results["quinn"] else "baseline"
        report["medians"]["quinn"] = summarise(f"mpq vs {against} (one connection, one stream)", order,
                                               results["quinn"], against)
        print(f"(ratios relative to {against})")
    if results["paths"]:
        order = list(results["paths"])
        report["medians"]["paths"] = summarise("mpq over several loopback paths, round-robin", order,
                                               results["paths"], order[0])
        print(f"(ratios relative to {order[0]})")
    if results["runtimes"]:
        order = list(results["runtimes"])
        med = {}
        for n in dict.fromkeys(k.split()[0] for k in order):
            sub = {k: v for k, v in results["runtimes"].items() if k.startswith(n + " ")}
            where = "veth pairs between namespaces" if net else "loopback"
            med |= summarise(f"{n[:-1]} path(s) over {where}: {', '.join(kinds)}", list(sub), sub,
                             f"{n} {kinds[0]}")
            print(f"(ratios relative to {n} {kinds[0]})")
            for k in sub:
                if "single" not in k:
                    cs = statistics.median(r["client_path_share"] for r in sub[k])
                    ss = statistics.median(r["server_path_share"] for r in sub[k])
                    each = statistics.median(min(r["server_path_threads"].values(), default=0) for r in sub[k])
                    most = statistics.median(max(r["server_path_threads"].values(), default=0) for r in sub[k])
                    print(f"   {k.split()[1]}: path/shard threads' share of the endpoint's CPU: client"
                          f" {100 * cs:.0f} %, server {100 * ss:.0f} % (one server thread:"
                          f" {100 * each:.0f}-{100 * most:.0f} %)")
        report["medians"]["runtimes"] = med
    report["runs"] = results
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
