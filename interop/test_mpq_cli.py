"""mpq against mpq over loopback: the multi-address command line (marker `mpq`).

The server listens on 127.0.0.1 and 127.0.0.2 (port 0 each: it prints both bound
addresses); the client binds one socket per --local and, with --path-mode pairs, opens
path 0 from 127.0.0.1 to the server's first address and path 1 from 127.0.0.2 to the one
given with --server-addr. Checked for `mpq server`/`mpq client` (a file, byte-exact) and
`mpq perf server`/`mpq perf client` (an exact byte count): multipath negotiated, two paths
that both carried stream data, path 1 between the two 127.0.0.2 addresses, the documented
JSON keys, the server's "connection ended" stats, and qlog events with path_id 1 on both
sides. The servers send with `--scheduler round-robin`: the default minrtt moves data to
path 1 only once path 0's window is full, which a sub-second loopback transfer may never
do, and these cases test the command line, not the scheduler. Shares the harness (process
handling, files, certificates) with test_interop.py.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from test_interop import (  # noqa: F401  (logdir, start_server, tls_files, www are fixtures)
    FILES,
    Server,
    find_mpq,
    logdir,
    require,
    run_client,
    sha256,
    start_server,
    tail,
    tls_files,
    www,
)
from test_interop_multipath import by_path_id, loopback_alias_available, mpq_server_conn_stats, parse_json_line

pytestmark = pytest.mark.mpq

TIMEOUT = 40.0  # client deadline (seconds)
# Each path must carry more than validation and ACKs: stream data.
DATA_MIN = 16 * 1024
PERF_BYTES = 20_000_000
# Sender-side scheduler (see the module docstring).
SERVER_SCHEDULER = ["--scheduler", "round-robin"]
LISTEN_RE = re.compile(r"listening on (127\.0\.0\.[12]):(\d+)")
# Keys `mpq perf client --json` documents (README, issue): top level and per path.
PERF_KEYS = ("goodput_bps", "duration_s", "bytes", "paths")
PATH_KEYS = ("path_id", "tx_bytes", "rx_bytes", "rtt_ms", "lost_packets")


def two_listeners(srv: Server) -> dict[str, int]:
    """Wait for both "listening on" lines; return {ip: port}."""
    ports: dict[str, int] = {}
    while len(ports) < 2:
        m = srv.wait_stdout(LISTEN_RE, 20.0, "both 'listening on' lines")
        ports[m.group(1)] = int(m.group(2))
    return ports


def qlog_events(directory: Path, vantage: str) -> list[dict]:
    """Events of the one `*_<vantage>.sqlog` file in directory (JSON-SEQ records)."""
    files = sorted(directory.glob(f"*_{vantage}.sqlog"))
    assert len(files) == 1, f"expected one {vantage} qlog file in {directory}, found {files}"
    events = []
    for record in files[0].read_text(errors="replace").split("\x1e"):
        record = record.strip()
        if not record:
            continue
        try:
            ev = json.loads(record)
        except ValueError:
            continue  # a server's last record may still be in its write buffer
        if "name" in ev:
            events.append(ev)
    return events


def event_path_id(ev: dict) -> int | None:
    data = ev.get("data", {})
    if "path_id" in data:
        return data["path_id"]
    return data.get("header", {}).get("path_id")


def check_qlog(directory: Path, vantage: str, local: str, peer: str, context: str) -> int:
    """Path 1 shows in the qlog: path_updated between the given addresses, then packets."""
    events = qlog_events(directory, vantage)
    p1 = [ev for ev in events if event_path_id(ev) == 1]
    assert p1, f"{vantage} qlog has no event with path_id 1{context}"
    updates = [ev["data"] for ev in p1 if ev["name"] == "connectivity:path_updated"]
    assert any(u.get("state") == "validated" for u in updates), f"{vantage} qlog: path 1 never validated: {updates}{context}"
    for u in updates:
        assert (u.get("local") or "").startswith(local) and (u.get("peer") or "").startswith(peer), (
            f"{vantage} qlog: path 1 is {u.get('local')} -> {u.get('peer')}, expected {local}* -> {peer}*{context}"
        )
    return len(p1)


def check_paths(paths: dict[int, dict], who: str, field: str, context: str) -> None:
    assert len(paths) >= 2, f"{who}: fewer than two paths: {paths}{context}"
    for pid in (0, 1):
        assert pid in paths, f"{who}: no path {pid}: {paths}{context}"
        assert paths[pid][field] >= DATA_MIN, (
            f"{who}: path {pid} {field}={paths[pid][field]} < {DATA_MIN} (no stream data on it?){context}"
        )


@pytest.fixture
def alias():
    if not loopback_alias_available():
        pytest.skip("cannot bind 127.0.0.2 (needed for the second address)")


def client_path_args(ports: dict[str, int], qlog: Path) -> list[str]:
    return [
        "--local", "127.0.0.1:0", "--local", "127.0.0.2:0",
        "--server-addr", f"127.0.0.2:{ports['127.0.0.2']}", "--path-mode", "pairs",
        "--json", "--qlog-dir", str(qlog),
    ]


def test_cli_two_addresses_hq(alias, tls_files, www, logdir, start_server, tmp_path):
    """`mpq server --listen A --listen B` + `mpq client --local .. --server-addr B --path-mode pairs`."""
    require("mpq", "server")
    require("mpq", "client")
    mpq = str(find_mpq())
    root, digests = www
    name = "10mb.bin"
    out = tmp_path / "downloads"
    sq, cq = logdir / "server-qlog", logdir / "client-qlog"
    env = dict(os.environ)
    env.pop("SSLKEYLOGFILE", None)

    srv = start_server([
        mpq, "server", "--listen", "127.0.0.1:0", "--listen", "127.0.0.2:0", "--root", str(root),
        "--cert", str(tls_files["cert"]), "--key", str(tls_files["key"]), "--qlog-dir", str(sq), *SERVER_SCHEDULER,
    ], env)
    ports = two_listeners(srv)
    cmd = [
        mpq, "client", f"https://127.0.0.1:{ports['127.0.0.1']}/{name}", "--output", str(out),
        "--ca", str(tls_files["ca"]), *client_path_args(ports, cq),
    ]
    rc, log = run_client(cmd, logdir, env, TIMEOUT)
    context = f"\n$ {' '.join(cmd)}\n--- client output (tail) ---\n{tail(log)}\n{srv.describe()}"
    assert rc is not None, f"client timed out after {TIMEOUT}s{context}"
    assert rc == 0, f"client exited with {rc}{context}"
    got = out / name
    assert got.is_file() and got.stat().st_size == FILES[name][0], f"{name}: missing or wrong size{context}"
    assert sha256(got) == digests[name], f"{name}: SHA-256 mismatch{context}"

    stats = parse_json_line(log)
    assert stats is not None, f"client printed no JSON line{context}"
    assert stats["multipath"] is True and stats["bytes"] == FILES[name][0], f"client JSON: {stats}{context}"
    check_paths(by_path_id(stats), "client", "rx_bytes", context)

    sstats = mpq_server_conn_stats(srv, context)
    context += f"\n--- server connection stats ---\n{sstats}"
    assert sstats["multipath"] is True, f"server: multipath not negotiated{context}"
    check_paths(by_path_id(sstats), "server", "tx_bytes", context)

    n_client = check_qlog(cq, "client", "127.0.0.2:", f"127.0.0.2:{ports['127.0.0.2']}", context)
    n_server = check_qlog(sq, "server", f"127.0.0.2:{ports['127.0.0.2']}", "127.0.0.2:", context)
    print(f"hq: {json.dumps([(p['path_id'], p['rx_bytes']) for p in stats['paths']])}; "
          f"qlog path-1 events client={n_client} server={n_server}")


def test_cli_two_addresses_perf(alias, logdir, start_server):
    """`mpq perf server --listen A --listen B` + `mpq perf client ... --path-mode pairs --json`."""
    require("mpq", "server")
    mpq = str(find_mpq())
    sq, cq = logdir / "server-qlog", logdir / "client-qlog"
    env = dict(os.environ)
    env.pop("SSLKEYLOGFILE", None)

    srv = start_server([
        mpq, "perf", "server", "--listen", "127.0.0.1:0", "--listen", "127.0.0.2:0", "--qlog-dir", str(sq), *SERVER_SCHEDULER,
    ], env)
    ports = two_listeners(srv)
    cmd = [
        mpq, "perf", "client", "--connect", f"127.0.0.1:{ports['127.0.0.1']}", "--bytes", str(PERF_BYTES),
        *client_path_args(ports, cq),
    ]
    rc, log = run_client(cmd, logdir, env, TIMEOUT)
    context = f"\n$ {' '.join(cmd)}\n--- client output (tail) ---\n{tail(log)}\n{srv.describe()}"
    assert rc is not None, f"perf client timed out after {TIMEOUT}s{context}"
    assert rc == 0, f"perf client exited with {rc}{context}"

    stats = parse_json_line(log)
    assert stats is not None, f"perf client printed no JSON line{context}"
    missing = [k for k in PERF_KEYS if k not in stats]
    assert not missing, f"perf JSON lacks {missing}: {stats}{context}"
    for p in stats["paths"]:
        missing = [k for k in PATH_KEYS if k not in p]
        assert not missing, f"perf JSON path lacks {missing}: {p}{context}"
    assert stats["bytes"] == PERF_BYTES, f"perf downloaded {stats['bytes']} bytes, asked for {PERF_BYTES}{context}"
    assert stats["duration_s"] > 0 and stats["goodput_bps"] > 0, f"perf JSON: {stats}{context}"
    expected = stats["bytes"] * 8 / stats["duration_s"]
    assert abs(stats["goodput_bps"] - expected) <= 1e-6 * expected, (
        f"goodput_bps {stats['goodput_bps']} != bytes*8/duration_s {expected}{context}"
    )
    assert stats["multipath"] is True, f"perf: multipath not negotiated{context}"
    paths = by_path_id(stats)
    check_paths(paths, "perf client", "rx_bytes", context)
    assert sum(p["rx_bytes"] for p in paths.values()) >= PERF_BYTES, f"paths carried less than the payload{context}"

    sstats = mpq_server_conn_stats(srv, context)
    context += f"\n--- perf server connection stats ---\n{sstats}"
    check_paths(by_path_id(sstats), "perf server", "tx_bytes", context)

    n_client = check_qlog(cq, "client", "127.0.0.2:", f"127.0.0.2:{ports['127.0.0.2']}", context)
    n_server = check_qlog(sq, "server", f"127.0.0.2:{ports['127.0.0.2']}", "127.0.0.2:", context)
    print(f"perf: {stats['goodput_bps'] / 1e6:.0f} Mbit/s; "
          f"{json.dumps([(p['path_id'], p['rx_bytes']) for p in stats['paths']])}; "
          f"qlog path-1 events client={n_client} server={n_server}")
