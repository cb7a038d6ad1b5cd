"""Multipath (RFC 10069) and DATAGRAM (RFC 9221) interop cases, split from test_interop.py
(which holds the shared machinery: peers, servers, fixtures). Run with interop/run.sh."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# The shared machinery and fixtures (a fixture imported here is a fixture of this module).
from test_interop import (  # noqa: F401  (free_udp_port, logdir, start_server, tls_files, www are fixtures)
    FILES,
    HERE,
    Server,
    _env_flag,
    check_download,
    find_mpq,
    free_udp_port,
    logdir,
    noq_path,
    require,
    run_client,
    server_cmd,
    start_server,
    tail,
    tls_files,
    www,
)

# --------------------------------------------------------------------------------------
# Multipath (RFC 10069): noq-peer against itself and against mpq.
#
# The noq client opens path 0 from 127.0.0.1 and, once multipath is negotiated, path 1
# from 127.0.0.2 (noq sends all paths through one wildcard-bound socket and picks the
# source IP per path; see noq-peer/src/main.rs). It prints one JSON line of per-path
# stats; every case checks negotiation, the per-path byte counts and the file digest.
# An mpq server prints one "connection ended: {json}" line per connection on stderr, with
# the same per-path stats as its client's JSON: cases with mpq as server check it too.

MP_LOCALS = ("127.0.0.1:0", "127.0.0.2:0")
# An Available second path must have received more than probes and ACKs: stream data.
MP_DATA_MIN = 16 * 1024
# A noq server (the sender of a download) moves data to path 1 only once path 0 is busy,
# which a loopback download often never reaches: 13 KiB of 10 MiB, and 12 KiB of 50 MiB,
# on path 1 were seen. Stream data on path 1 is therefore required from an mpq sender
# only; from a noq sender, path 1 must carry packets.
# How long an mpq server may take to print its "connection ended" line after the client
# exited (it needs the client's CONNECTION_CLOSE; generous for a loaded machine).
CONN_END_TIMEOUT = 20.0
CONN_END_RE = re.compile(r"^connection ended: (\{.*\})$", re.M)


@dataclass(frozen=True)
class MpCase:
    name: str
    files: tuple[str, ...]
    timeout: float
    backup: bool = False  # open the second path with status backup
    abandon_after_ms: int | None = None  # close the second path this long after it opened
    ack_policy: str | None = None  # mpq's --ack-policy (noq has no such knob)
    # Through interop/relay.py, which cuts the second path (the client's 127.0.0.2) off this
    # many seconds into the connection, silently: no PATH_ABANDON, no ICMP.
    path_dies_after_s: float | None = None
    pairs: tuple[tuple[str, str], ...] | None = None  # default: MP_PAIRS


MP_PAIRS = [("noq", "noq"), ("noq", "mpq"), ("mpq", "noq")]

MP_CASES = [
    MpCase("mp_two_paths", ("10mb.bin",), 40.0),
    # Long enough for PTOs / "potentially failed" paths and cross-path retransmission.
    MpCase("mp_two_paths_50mb", ("50mb.bin",), 60.0),
    MpCase("mp_backup", ("10mb.bin",), 40.0, backup=True),
    # 50 MiB so that the abandon (50 ms after path 1 was validated) lands mid-transfer even
    # for mpq's client, which fetches 10 MiB over loopback in ~40 ms.
    MpCase("mp_abandon", ("50mb.bin",), 60.0, abandon_after_ms=50),
    # mpq puts every PATH_ACK on the lowest-RTT path, so the other path's ACKs cross over;
    # noq as the receiver has to take them. noq-noq has nothing to configure here.
    MpCase("mp_path_ack", ("10mb.bin",), 40.0, ack_policy="lowest-rtt", pairs=(("noq", "mpq"), ("mpq", "noq"))),
    # The second path goes dark mid-transfer (the relay moves 50 MiB in several seconds):
    # what was in flight on it is resent on the first, and the download completes. Not
    # noq-noq: noq as the sender keeps what it had in flight on a silently dead path until
    # that path is abandoned, and noq as the receiver does not abandon it (its downloads
    # stall to the timeout); with mpq on either side the dead path is abandoned.
    MpCase("mp_path_dies", ("50mb.bin",), 60.0, path_dies_after_s=0.5, pairs=(("noq", "mpq"), ("mpq", "noq"))),
]


def _mp_params():
    for case in MP_CASES:
        for client, server in case.pairs or MP_PAIRS:
            marks = [pytest.mark.multipath]
            if "mpq" in (client, server):
                marks.append(pytest.mark.mpq)
            yield pytest.param(case, client, server, id=f"{case.name}-{client}-{server}", marks=marks)


def loopback_alias_available() -> bool:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.2", 0))
        return True
    except OSError:
        return False


def mp_server_cmd(impl: str, port: int, root: Path, tls: dict[str, Path], logdir: Path, case: MpCase) -> list[str]:
    if impl == "noq":
        return [str(noq_path()), "server", "--listen", f"127.0.0.1:{port}", "--root", str(root)]
    cmd = server_cmd(impl, port, root, tls, logdir)
    if impl == "mpq" and case.ack_policy:
        cmd += ["--ack-policy", case.ack_policy]
    return cmd


def mp_client_cmd(impl: str, urls: list[str], out: Path, case: MpCase) -> list[str]:
    if impl == "noq":
        cmd = [str(noq_path()), "client", *urls, "--output", str(out), "--json",
               "--timeout", str(int(case.timeout))]
        for local in MP_LOCALS:
            cmd += ["--local", local]
        if case.backup:
            cmd.append("--backup")
        if case.abandon_after_ms is not None:
            cmd += ["--abandon-after-ms", str(case.abandon_after_ms)]
        return cmd
    if impl == "mpq":
        cmd = [str(find_mpq()), "client", *urls, "--insecure", "--output", str(out), "--json"]
        for local in MP_LOCALS:
            cmd += ["--local", local]
        if case.backup:
            cmd.append("--backup-paths")
        if case.abandon_after_ms is not None:
            cmd += ["--abandon-after-ms", str(case.abandon_after_ms)]
        if case.ack_policy:
            cmd += ["--ack-policy", case.ack_policy]
        return cmd
    raise ValueError(impl)


def parse_json_line(log: str) -> dict | None:
    import json

    for line in reversed(log.splitlines()):
        line = line.strip()
        if line.startswith("{") and '"multipath"' in line:
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def mpq_server_conn_stats(srv: Server, context: str) -> dict:
    """The JSON of the mpq server's "connection ended" line (waits for it)."""
    import json

    m = srv.wait_stderr(CONN_END_RE, CONN_END_TIMEOUT, "'connection ended: {...}'")
    try:
        return json.loads(m.group(1))
    except ValueError as exc:
        raise AssertionError(f"bad 'connection ended' JSON ({exc}): {m.group(1)}{context}") from None


def by_path_id(stats: dict) -> dict[int, dict]:
    return {p["path_id"]: p for p in stats.get("paths", [])}


@pytest.mark.parametrize("case,client,server", list(_mp_params()))
def test_multipath(
    case: MpCase, client: str, server: str, tls_files, www, free_udp_port, logdir, start_server, tmp_path, request
):
    if client == "mpq":
        if os.environ.get("INTEROP_MPQ_MULTIPATH", "1") == "0":
            pytest.skip("mpq client multipath cases disabled (INTEROP_MPQ_MULTIPATH=0)")
    require(server, "server")
    require(client, "client")
    if not loopback_alias_available():
        pytest.skip("cannot bind 127.0.0.2 (needed for the second path's local address)")
    root, digests = www
    out = tmp_path / "downloads"
    out.mkdir()

    env = dict(os.environ)
    env.pop("SSLKEYLOGFILE", None)
    client_env = dict(env, SSLKEYLOGFILE=str(logdir / "client.keylog"))

    srv = start_server(mp_server_cmd(server, free_udp_port, root, tls_files, logdir, case), env)
    port = srv.wait_listening()
    relay = None
    if case.path_dies_after_s is not None:
        relay_cmd = [
            sys.executable, str(HERE / "relay.py"), "--server", f"127.0.0.1:{port}",
            "--blackhole-from", f"{MP_LOCALS[1].split(':')[0]}:{case.path_dies_after_s}",
        ]
        relay_dir = logdir / "relay"
        relay_dir.mkdir(exist_ok=True)
        relay = Server(relay_cmd, relay_dir, dict(env, PYTHONUNBUFFERED="1"))
        request.addfinalizer(relay.stop)
        port = relay.wait_listening()
    urls = [f"https://127.0.0.1:{port}/{name}" for name in case.files]
    cmd = mp_client_cmd(client, urls, out, case)
    started = time.monotonic()
    rc, client_log = run_client(cmd, logdir, client_env, case.timeout)
    elapsed = time.monotonic() - started
    server_state = "alive" if srv.alive() else f"DEAD (exit code {srv.proc.returncode})"
    context = (
        f"\n$ {' '.join(cmd)}\n--- client output (tail) ---\n{tail(client_log)}\n"
        f"--- server is {server_state} ---\n{srv.describe()}"
    )

    check_download(rc, case, out, digests, srv, context)

    stats = parse_json_line(client_log)
    assert stats is not None, f"client printed no JSON stats line{context}"
    assert stats.get("multipath") is True, f"multipath was not negotiated: {stats}{context}"
    paths = by_path_id(stats)
    assert len(paths) >= 2, f"expected two paths, got {stats.get('paths')}{context}"
    for pid, p in paths.items():
        # (After the second path died, an mpq client's path manager opens others from the
        # same address, which the dead path's black hole keeps from ever validating: they
        # are still validating at the end, or were abandoned when validation failed, as
        # happened when the transfer ran slower on a busy machine.)
        if case.path_dies_after_s is not None and pid > 1:
            continue
        assert p["rx_bytes"] > 0, f"path {pid} received nothing: {stats}{context}"
    size = sum(FILES[name][0] for name in case.files)
    if not case.backup and case.abandon_after_ms is None and server != "noq":
        second = [p for pid, p in paths.items() if pid != 0]
        assert any(p["rx_bytes"] >= MP_DATA_MIN for p in second), (
            f"second path received under {MP_DATA_MIN} bytes (no stream data on it?): {stats}{context}"
        )
    if case.backup:
        # The client marks path 1 backup (PATH_BACKUP): the server should keep the
        # transfer on path 0 and use path 1 for little more than probes and ACKs.
        first = paths[0]["rx_bytes"]
        for pid, p in paths.items():
            assert pid == 0 or p["rx_bytes"] * 10 < first, (
                f"backup path {pid} carried {p['rx_bytes']} bytes vs {first} on path 0: {stats}{context}"
            )
    if client == "noq":
        assert "handshake completed alpn=hq-interop multipath=true" in client_log, f"no multipath handshake line{context}"
        assert re.search(r"client: path [1-9]\d* established", client_log), f"second path never established{context}"

    extra = ""
    if server == "mpq":
        # The server's own view of the connection: the same paths, seen from the other end.
        sstats = mpq_server_conn_stats(srv, context)
        context += f"\n--- mpq server connection stats ---\n{sstats}"
        spaths = by_path_id(sstats)
        assert sstats.get("multipath") is True, f"mpq server: multipath not negotiated{context}"
        assert len(spaths) >= 2, f"mpq server saw fewer than two paths{context}"
        if case.backup:
            assert any(p.get("backup") for pid, p in spaths.items() if pid != 0), (
                f"mpq server never got PATH_STATUS_BACKUP for the second path{context}"
            )
        extra = "; server " + ", ".join(
            f"path {pid} tx={p['tx_bytes']} {p['state']} acks_out={p['acks_for_other_paths']}"
            f" acks_in={p['rx_acks_for_other_paths']}" for pid, p in sorted(spaths.items())
        )
    else:
        sstats = None

    if case.abandon_after_ms is not None:
        check_abandon(client, server, client_log, paths, sstats, srv, context)
    if case.ack_policy:
        check_path_acks(client, server, paths, sstats, context)
    if relay is not None:
        check_path_death(client, server, paths, sstats, relay, context)

    def describe_path(pid: int, p: dict) -> str:
        text = f"path {pid} rx={p['rx_bytes']} tx={p['tx_bytes']}"
        if client == "mpq":
            text += f" {p['state']} acks_out={p['acks_for_other_paths']} acks_in={p['rx_acks_for_other_paths']}"
        return text

    summary = ", ".join(describe_path(pid, p) for pid, p in sorted(paths.items()))
    print(f"{case.name} {client}->{server}: {elapsed:.2f}s; {summary}{extra}")


def check_abandon(client: str, server: str, client_log: str, paths: dict[int, dict], sstats: dict | None, srv: Server, context: str) -> None:
    """The client abandoned path 1 mid-transfer: both ends must show it."""
    if client == "mpq":
        assert re.search(r"^abandoned path [1-9]\d* \(PATH_ABANDON queued\)", client_log, re.M), (
            f"mpq client did not abandon a path{context}"
        )
        abandoned = [pid for pid, p in paths.items() if pid != 0 and p.get("state") == "abandoned"]
        assert abandoned, f"mpq client's JSON shows no abandoned path{context}"
        assert paths[0].get("state") == "active", f"path 0 is not active at the end{context}"
    else:
        assert re.search(r"^closed path [1-9]\d* after \d+ ms", client_log, re.M), (
            f"noq client did not close its second path{context}"
        )
        assert re.search(r"^client: path [1-9]\d* abandoned", client_log, re.M), (
            f"noq client reported no abandoned path{context}"
        )
    if server == "mpq":
        assert sstats is not None
        spaths = by_path_id(sstats)
        assert any(pid != 0 and p.get("state") == "abandoned" for pid, p in spaths.items()), (
            f"mpq server did not see the second path abandoned{context}"
        )
    else:
        # noq logs the PATH_ABANDON it received from an event task: wait for the line.
        srv.wait_stderr(re.compile(r"^server: path [1-9]\d* abandoned", re.M), CONN_END_TIMEOUT,
                        "'server: path N abandoned'")


def check_path_death(client: str, server: str, paths: dict[int, dict], sstats: dict | None, relay: Server, context: str) -> None:
    """The relay cut the second path off mid-transfer and the download completed (checked
    before): the relay really dropped its traffic, and the mpq end saw the path's packets
    lost and stopped counting on it."""
    relay.stop()
    lines = relay.stdout_path.read_text().splitlines()
    relay_stats = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    assert relay_stats.get("dropped", 0) > 0, f"the relay dropped nothing on the second path ({relay_stats}){context}"
    mpq_paths = paths if client == "mpq" else by_path_id(sstats or {})
    print(f"relay: {relay_stats}; mpq's paths: {mpq_paths}")
    # mpq declared the dead path dead (as the sender by its data's PTOs, as the receiver
    # by the peer's silence there while it kept sending on path 0) and abandoned it.
    assert mpq_paths.get(1, {}).get("state") == "abandoned", f"mpq did not abandon the dead path 1: {mpq_paths}{context}"


def check_path_acks(client: str, server: str, paths: dict[int, dict], sstats: dict | None, context: str) -> None:
    """mpq ran with an ACK policy that moves PATH_ACKs off their own path: some must have
    crossed, and the noq peer must have taken them (the transfer finished byte-exact)."""
    mpq_paths = paths if client == "mpq" else by_path_id(sstats or {})
    sent = sum(p.get("acks_for_other_paths", 0) for p in mpq_paths.values())
    assert sent > 0, f"mpq sent no PATH_ACK on another path than the one it acknowledges{context}"
    if client == "noq":
        # noq's client sends nearly all its packets on path 0 (path 1 only carries its
        # validation), so its PATH_ACKs for path 1 arrive on path 0: mpq must count them.
        got = sum(p.get("rx_acks_for_other_paths", 0) for p in mpq_paths.values())
        assert got > 0, f"mpq server received no PATH_ACK for one path on another{context}"


# --------------------------------------------------------------------------------------
# DATAGRAM (RFC 9221): mpq perf --datagrams against aioquic/dgram_peer.py, both ways.


def _mpq_perf_datagrams() -> Path:
    """The mpq binary, if its `perf client` has --datagrams (else skip or fail)."""
    require("mpq", "client")
    binary = find_mpq()
    assert binary is not None
    r = subprocess.run([str(binary), "perf", "client", "--help"], capture_output=True, text=True, timeout=10)
    if "--datagrams" not in r.stdout + r.stderr:
        reason = f"{binary} perf client has no --datagrams yet"
        if _env_flag("INTEROP_REQUIRE_MPQ"):
            pytest.fail(reason)
        pytest.skip(reason)
    return binary


def _start_dgram_server(start_server, tls_files, port: int, env: dict[str, str]):
    """aioquic's DATAGRAM peer as a server on `port`: the server and the port it listens on."""
    peer = str(HERE / "aioquic/dgram_peer.py")
    srv = start_server(
        [sys.executable, peer, "server", "--port", str(port),
         "--cert", str(tls_files["cert"]), "--key", str(tls_files["key"])],
        env,
    )
    return srv, srv.wait_listening()


@pytest.mark.mpq
@pytest.mark.parametrize("direction", ["mpq->aioquic", "aioquic->mpq"])
def test_datagrams(direction: str, tls_files, free_udp_port, logdir, start_server):
    """Datagrams both ways between mpq and aioquic (ALPN "perf", mpq perf's protocol).

    mpq->aioquic: `mpq perf client --datagrams` sends for a second; the aioquic server counts
    what arrives (its report is mpq's "received") and echoes every datagram, which mpq
    counts ("echoed"). aioquic->mpq: the aioquic client sends 200 datagrams to
    `mpq perf server`, which reports how many it received.
    """
    require("aioquic", "server")
    mpq = _mpq_perf_datagrams()
    env = dict(os.environ)
    peer = str(HERE / "aioquic/dgram_peer.py")
    if direction == "mpq->aioquic":
        srv, port = _start_dgram_server(start_server, tls_files, free_udp_port, env)
        cmd = [str(mpq), "perf", "client", "--connect", f"127.0.0.1:{port}", "--datagrams",
               "--duration", "1", "--datagram-size", "500", "--json"]
        rc, log = run_client(cmd, logdir, env, 30)
        context = f"\n$ {' '.join(cmd)}\n{tail(log)}\n{srv.describe()}"
        assert rc == 0, f"mpq perf client exited with {rc}{context}"
        summary = json.loads(log.strip().splitlines()[-1])
        d = summary["datagrams"]
        assert d["sent"] > 100, context
        assert d["received"] > 0 and d["received"] + d["lost"] == d["sent"], context
        # aioquic echoed what it received: datagrams came back the other way.
        assert d["echoed"] > 0, context
        print(f"datagrams mpq->aioquic: sent {d['sent']}, received {d['received']}, echoed {d['echoed']}")
    else:
        srv = start_server([str(mpq), "perf", "server", "--listen", f"127.0.0.1:{free_udp_port}"], env)
        port = srv.wait_listening()
        cmd = [sys.executable, peer, "client", "--port", str(port), "--count", "200", "--size", "500"]
        rc, log = run_client(cmd, logdir, env, 30)
        context = f"\n$ {' '.join(cmd)}\n{tail(log)}\n{srv.describe()}"
        assert rc == 0, f"aioquic client exited with {rc}{context}"
        summary = json.loads(log.strip().splitlines()[-1])
        # Loopback, paced sender: nearly everything arrives.
        assert summary["received_by_server"] >= 180, context
        print(f"datagrams aioquic->mpq: sent {summary['sent']}, received {summary['received_by_server']}")


def _qlog_0rtt_datagram(qlog_dir: Path, event: str) -> bool:
    """An mpq qlog file in qlog_dir records a 0-RTT packet `event` (packet_sent/_received)
    holding a DATAGRAM frame."""
    for f in qlog_dir.glob("*") if qlog_dir.is_dir() else []:
        for line in f.read_text(errors="replace").splitlines():
            flat = line.replace(" ", "")
            if event in flat and '"packet_type":"0RTT"' in flat and '"frame_type":"datagram"' in flat:
                return True
    return False


@pytest.mark.mpq
@pytest.mark.parametrize("direction", ["mpq->aioquic", "aioquic->mpq"])
def test_datagrams_in_0rtt(direction: str, tls_files, free_udp_port, logdir, start_server):
    """DATAGRAM frames in 0-RTT (RFC 9221 §3) between mpq and aioquic: a resumed client
    sends datagrams before its handshake completes, under the max_datagram_frame_size it
    remembered with the ticket.

    mpq->aioquic: `mpq perf client --datagrams --0rtt` (a first connection takes the ticket);
    mpq reports the early data accepted and datagrams sent in 0-RTT, and the aioquic server
    counts datagrams that arrived before its handshake completed. aioquic->mpq: the aioquic
    client resumes and queues its datagrams at once; mpq's server qlog shows a 0-RTT packet
    with a DATAGRAM frame, and its count is the report.
    """
    require("aioquic", "server")
    mpq = _mpq_perf_datagrams()
    env = dict(os.environ)
    peer = str(HERE / "aioquic/dgram_peer.py")
    if direction == "mpq->aioquic":
        srv, port = _start_dgram_server(start_server, tls_files, free_udp_port, env)
        cmd = [str(mpq), "perf", "client", "--connect", f"127.0.0.1:{port}", "--datagrams", "--0rtt",
               "--duration", "1", "--datagram-size", "500", "--json"]
        rc, log = run_client(cmd, logdir, env, 30)
        context = f"\n$ {' '.join(cmd)}\n{tail(log)}\n{srv.describe()}"
        assert rc == 0, f"mpq perf client exited with {rc}{context}"
        summary = json.loads(log.strip().splitlines()[-1])
        d = summary["datagrams"]
        assert summary["zero_rtt"] == "accepted", context
        assert d["sent_0rtt"] > 0 and d["received"] > 0, context
        early = srv.wait_stderr(re.compile(r"report: \d+ datagrams, \d+ bytes, early (\d+)"), 5.0, "the report")
        assert int(early.group(1)) > 0, f"aioquic took no datagram before its handshake completed{context}"
        print(f"0-RTT datagrams mpq->aioquic: {d['sent_0rtt']} in 0-RTT, {early.group(1)} early at the server")
    else:
        qlog = logdir / "server-qlog"
        srv = start_server([str(mpq), "perf", "server", "--listen", f"127.0.0.1:{free_udp_port}",
                            "--qlog-dir", str(qlog)], env)
        port = srv.wait_listening()
        cmd = [sys.executable, peer, "client", "--port", str(port), "--count", "200", "--size", "500", "--0rtt"]
        rc, log = run_client(cmd, logdir, env, 30)
        context = f"\n$ {' '.join(cmd)}\n{tail(log)}\n{srv.describe()}"
        assert rc == 0, f"aioquic client exited with {rc}{context}"
        summary = json.loads(log.strip().splitlines()[-1])
        assert summary["early_data_accepted"] is True, context
        assert summary["received_by_server"] >= 180, context
        deadline = time.monotonic() + 5.0
        while not _qlog_0rtt_datagram(qlog, "packet_received") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _qlog_0rtt_datagram(qlog, "packet_received"), f"mpq server qlog: no 0-RTT DATAGRAM{context}"
        print(f"0-RTT datagrams aioquic->mpq: received {summary['received_by_server']} of {summary['sent']}")
