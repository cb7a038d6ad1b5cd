"""mpq through the QUIC interop runner's endpoint contract, without Docker (issue F item 8).

`interop/endpoint/run_endpoint.sh` is what the runner's containers run: it reads ROLE,
TESTCASE, REQUESTS, SSLKEYLOGFILE and QLOGDIR and serves /www, downloads into /downloads and
takes /certs (here WWW, DOWNLOADS, CERTS and PORT point it at temporary directories). Each
case starts the server and the client as the runner would, with mpq on either side through
that script and aioquic or quic-go on the other through the suite's own commands, and checks
what the runner checks that can be seen without its packet captures: the files arrive whole,
and the logs show the case's feature (a Retry, a resumed session, 0-RTT, v2, ChaCha20, a key
update, one connection per file). A case mpq does not support must exit 127 on both roles.
"""
from __future__ import annotations

import json
import os
import re
import ssl
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import certs
from resumption import RESUME_ARGS, check_resumption
from test_interop import (  # noqa: F401 (fixtures are found by name)
    FILES,
    MULTIPLEXING_FILES,
    Server,
    VERSION_ARGS,
    Case,
    _client_cmd,
    _server_cmd,
    find_mpq,
    free_udp_port,
    logdir,
    require,
    run_client,
    sha256,
    start_server,
    tail,
    tls_files,
    www,
)

HERE = Path(__file__).resolve().parent
RUN_ENDPOINT = HERE / "endpoint" / "run_endpoint.sh"


@dataclass(frozen=True)
class Contract:
    testcase: str
    files: tuple[str, ...]
    timeout: float = 30.0
    ipv6: bool = False
    # The impairment relay's arguments (interop/relay.py) between client and server, and
    # which of its counters must be positive afterwards.
    relay: tuple[str, ...] = ()
    relay_check: str = ""
    # Pairs other than mpq -> mpq (client, server); the peer side runs the suite's command
    # with the mode's flags.
    peers: tuple[tuple[str, str], ...] = ()
    # The server's certificate is inflated past three 1200-byte Initials (amplificationlimit).
    big_cert: bool = False


PEERS = (
    ("mpq", "aioquic"), ("aioquic", "mpq"), ("mpq", "quicgo"), ("quicgo", "mpq"), ("mpq", "quinn"), ("quinn", "mpq"),
)
# The peers that mark ECN (aioquic does not).
ECN_PEERS = (("mpq", "quicgo"), ("quicgo", "mpq"), ("mpq", "quinn"), ("quinn", "mpq"))

CONTRACTS = [
    Contract("handshake", ("small.bin",), peers=PEERS),
    Contract("transfer", ("small.bin", "1mb.bin", "10mb.bin"), 60.0, peers=PEERS),
    Contract("multiconnect", ("small.bin", "small2.bin", "small3.bin")),
    Contract("chacha20", ("small.bin", "1mb.bin")),
    Contract("retry", ("small.bin",), peers=PEERS),
    Contract("keyupdate", ("1mb.bin",)),
    Contract("resumption", ("small.bin", "1mb.bin"), peers=PEERS),
    Contract("zerortt", ("small.bin", "1mb.bin"), peers=(("mpq", "aioquic"), ("aioquic", "mpq"), ("mpq", "quinn"), ("quinn", "mpq"))),
    Contract("v2", ("small.bin",), peers=(("mpq", "aioquic"), ("aioquic", "mpq"))),
    Contract("ipv6", ("small.bin", "1mb.bin"), ipv6=True),
    Contract("multiplexing", MULTIPLEXING_FILES, 60.0, peers=PEERS),
    Contract("goodput", ("10mb.bin",), 60.0, peers=PEERS),
    # HTTP/3 on both roles (mpq against the peers' HTTP/3: test_interop_http3.py).
    Contract("http3", ("small.bin", "1mb.bin", "10mb.bin"), 60.0),
    # The server offers 127.0.0.2:<port> as its preferred address (PREFERRED_ADDRESSES).
    Contract("connectionmigration", ("small.bin", "10mb.bin"), 60.0),
    # The runner's network cases, with interop/relay.py in place of its simulator.
    Contract("transferloss", ("small.bin", "1mb.bin"), 60.0, relay=("--loss", "0.02"), relay_check="dropped", peers=PEERS),
    Contract("handshakeloss", ("small.bin", "small2.bin", "small3.bin"), 90.0, relay=("--loss", "0.3"), relay_check="dropped", peers=PEERS),
    Contract("transfercorruption", ("small.bin", "1mb.bin"), 60.0, relay=("--corrupt", "0.02"), relay_check="corrupted", peers=PEERS),
    Contract("handshakecorruption", ("small.bin", "small2.bin", "small3.bin"), 90.0, relay=("--corrupt", "0.3"), relay_check="corrupted", peers=PEERS),
    # From 50 ms after the first datagram, well inside the transfer: mpq to mpq moved all
    # 10 MB through the relay within 0.2 s on a fast host (2026-12-05), before a window
    # that began there, and nothing was dropped.
    Contract("blackhole", ("10mb.bin",), 60.0, relay=("--blackhole", "0.05:1.05"), relay_check="dropped", peers=PEERS),
    # The rebinds start 50 ms in, as the blackhole: a fast host moved all 10 MB mpq to mpq
    # within 0.2 s, before a first rebind there (2026-12-05).
    Contract("rebind-port", ("10mb.bin",), 60.0, relay=("--rebind-port-every", "0.05"), relay_check="rebinds", peers=PEERS),
    Contract("rebind-addr", ("10mb.bin",), 60.0, relay=("--rebind-addr-after", "0.05"), relay_check="rebinds", peers=PEERS),
    # ECN (RFC 9000 §13.4): both sides mark ECT(0) and report the marks they received.
    Contract("ecn", ("small.bin", "1mb.bin"), peers=ECN_PEERS),
    # The server's certificate is too big for three times the client's Initial; once the
    # server's flight begins, the relay delivers nothing more from the client for 1 s and
    # counts what the server sends until then.
    Contract(
        "amplificationlimit",
        ("small.bin",),
        60.0,
        relay=("--amplification-window", "1.0"),
        relay_check="amp_server_bytes",
        peers=PEERS,
        big_cert=True,
    ),
    # The runner's 1.5 s round trip.
    Contract("longrtt", ("small.bin", "1mb.bin"), 90.0, relay=("--delay", "0.75"), relay_check="delayed", peers=(("mpq", "quicgo"), ("quicgo", "mpq"))),
]
# Cases mpq does not support (yet): both roles exit 127, as the runner requires.
UNSUPPORTED = ["no-such-testcase"]


def free_port_on(host: str) -> int:
    """A UDP port on `host` that was free a moment ago."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _params():
    for c in CONTRACTS:
        for client, server in (("mpq", "mpq"),) + c.peers:
            yield pytest.param(c, client, server, id=f"{c.testcase}-{client}-{server}")


def start_relay(cmd: list[str], logdir: Path) -> Server:
    """The impairment relay as a process watched like a server (its own log files)."""
    relay_dir = logdir / "relay"
    relay_dir.mkdir(exist_ok=True)
    return Server(cmd, relay_dir, dict(os.environ, PYTHONUNBUFFERED="1"))


def endpoint_env(role: str, testcase: str, tmp: Path, tls: dict[str, Path], port: int, logdir: Path) -> dict[str, str]:
    """The runner's environment for run_endpoint.sh, pointed at this test's directories."""
    certs = tmp / f"certs-{role}"
    certs.mkdir(exist_ok=True)
    if role == "server":
        (certs / "cert.pem").write_bytes(tls["cert"].read_bytes())
        (certs / "priv.key").write_bytes(tls["key"].read_bytes())
    else:
        # The runner gives the client no CA (it then does not verify); here it gets one.
        (certs / "ca.pem").write_bytes(tls["ca"].read_bytes())
    env = dict(os.environ)
    env.pop("SSLKEYLOGFILE", None)
    env.update(
        MPQ=str(find_mpq()),
        ROLE=role,
        TESTCASE=testcase,
        CERTS=str(certs),
        PORT=str(port),
        SSLKEYLOGFILE=str(logdir / f"{role}.keylog"),
        QLOGDIR=str(logdir / f"{role}-qlog"),
        QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def peer_mode(testcase: str) -> tuple[bool, str | None, str | None]:
    """(retry, versions mode, resume mode) of the suite's peer commands for a test case."""
    return (
        testcase == "retry",
        "upgrade" if testcase == "v2" else None,
        testcase if testcase in ("resumption", "zerortt") else None,
    )


@pytest.mark.mpq
@pytest.mark.parametrize("contract,client,server", list(_params()))
def test_endpoint_contract(
    contract, client, server, tls_files, big_tls_files, www, free_udp_port, logdir, start_server, tmp_path, request
):
    require("mpq", "client")
    require("mpq", "server")
    require(server, "server")
    require(client, "client")
    root, digests = www
    out = tmp_path / "downloads"
    out.mkdir()
    retry, versions, resume = peer_mode(contract.testcase)
    if contract.big_cert:
        tls_files = big_tls_files

    if server == "mpq":
        env = endpoint_env("server", contract.testcase, tmp_path, tls_files, free_udp_port, logdir)
        env["WWW"] = str(root)
        if contract.testcase == "connectionmigration":
            env["PREFERRED_ADDRESSES"] = f"127.0.0.2:{free_port_on('127.0.0.2')}"
        srv = start_server(["bash", str(RUN_ENDPOINT)], env)
    else:
        cmd = _server_cmd(server, free_udp_port, root, tls_files, logdir, retry)
        cmd += VERSION_ARGS[(server, "server", versions)] if versions else []
        if resume == "zerortt":
            cmd += {"quicgo": ["-0rtt"], "quinn": ["--0rtt"]}.get(server, [])
        env = dict(os.environ, QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING="1", PYTHONUNBUFFERED="1")
        srv = start_server(cmd, env)
    port = srv.wait_listening()
    relay = None
    if contract.relay:
        relay_cmd = [sys.executable, str(HERE / "relay.py"), "--server", f"127.0.0.1:{port}", *contract.relay]
        relay = start_relay(relay_cmd, logdir)
        request.addfinalizer(relay.stop)
        port = relay.wait_listening()
    host = "[::1]" if contract.ipv6 else "127.0.0.1"
    urls = [f"https://{host}:{port}/{name}" for name in contract.files]

    if client == "mpq":
        env = endpoint_env("client", contract.testcase, tmp_path, tls_files, port, logdir)
        env.update(DOWNLOADS=str(out), REQUESTS=" ".join(urls))
        cmd = ["bash", str(RUN_ENDPOINT)]
    else:
        case = Case(contract.testcase, contract.files, contract.timeout, retry=retry, versions=versions, resume=resume)
        cmd = _client_cmd(client, urls, out, tls_files, case)
        if resume:
            cmd = cmd[:2] + RESUME_ARGS[(client, resume)] + cmd[2:] if client != "aioquic" else cmd + RESUME_ARGS[(client, resume)]
        if versions:
            extra = VERSION_ARGS[(client, "client", versions)]
            cmd = cmd[:2] + extra + cmd[2:] if client != "aioquic" else cmd + extra
        env = dict(os.environ, SSLKEYLOGFILE=str(logdir / "client.keylog"), QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING="1")
    rc, client_log = run_client(cmd, logdir, env, contract.timeout)
    context = f"\n$ {' '.join(cmd)}\n--- client output (tail) ---\n{tail(client_log)}\n{srv.describe()}"

    assert rc is not None, f"client timed out after {contract.timeout}s{context}"
    assert rc == 0, f"client exited with {rc}{context}"
    for name in contract.files:
        got = out / name
        assert got.is_file() and got.stat().st_size == FILES[name][0], f"{name} missing or cut short{context}"
        assert sha256(got) == digests[name], f"{name}: SHA-256 mismatch{context}"
    assert srv.alive(), f"server exited during the test{context}"
    check_feature(contract, client, server, client_log, srv, logdir, context)
    if relay is not None:
        # The impairment really happened (the relay prints its counters when stopped).
        relay.stop()
        lines = relay.stdout_path.read_text().splitlines()
        stats = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
        assert stats.get(contract.relay_check, 0) > 0, f"the relay did not impair ({stats}){context}"
        if contract.testcase == "amplificationlimit":
            check_amplification(stats, tls_files, context)


@pytest.fixture(scope="session")
def big_tls_files(tmp_path_factory) -> dict[str, Path]:
    """Certificates whose leaf is inflated as the runner's for amplificationlimit."""
    return certs.generate(tmp_path_factory.mktemp("big-tls"), san_padding=60)


def check_amplification(stats: dict, tls: dict[str, Path], context: str) -> None:
    """Until it heard from the client again, the server sent at most three times the bytes it
    had received (RFC 9000 §8.1), though its certificate alone needs more."""
    client_bytes, server_bytes = stats["amp_client_bytes"], stats["amp_server_bytes"]
    leaf_der = len(ssl.PEM_cert_to_DER_cert(tls["leaf"].read_text()))
    assert leaf_der > 3 * client_bytes, f"the certificate ({leaf_der} B) fits in the limit: no test{context}"
    assert server_bytes <= 3 * client_bytes, (
        f"the server sent {server_bytes} B for the client's {client_bytes} B before validating its address{context}"
    )


def qlog_ack_ecn(qlog_dir: Path) -> tuple[int, int]:
    """(ECN-marked packets the peer reported in the ACKs mpq received, ECN-marked packets mpq
    reported in the ACKs it sent), the largest counts in mpq's qlog files in qlog_dir (ACK
    and multipath's PATH_ACK frames)."""
    got = sent = 0
    for f in qlog_dir.glob("*") if qlog_dir.is_dir() else []:
        for line in f.read_text(errors="replace").splitlines():
            line = line.lstrip("\x1e")
            if '"ect0"' not in line:
                continue
            ev = json.loads(line)
            for fr in ev.get("data", {}).get("frames", []):
                if fr.get("frame_type") not in ("ack", "path_ack"):  # PATH_ACK: RFC 10069
                    continue
                marks = fr.get("ect0", 0) + fr.get("ect1", 0) + fr.get("ce", 0)
                if ev["name"] == "transport:packet_received":
                    got = max(got, marks)
                elif ev["name"] == "transport:packet_sent":
                    sent = max(sent, marks)
    return got, sent


def check_feature(contract: Contract, client: str, server: str, client_log: str, srv, logdir: Path, context: str) -> None:
    """What the case is about, as the mpq side's log or qlog shows it."""
    t = contract.testcase
    server_log = lambda: srv.stderr() + srv.stdout_path.read_text(errors="replace")  # noqa: E731
    if t == "handshake" and server == "mpq":
        assert "Retry sent" not in server_log(), f"the server sent a Retry in the handshake case{context}"
    if t == "retry":
        if client == "mpq":
            assert "Retry received" in client_log, f"mpq client saw no Retry{context}"
        if server == "mpq":
            srv.wait_stderr(re.compile("Retry sent"), 5.0, "Retry sent")
    if t == "multiconnect":
        # One connection per file: as many full handshakes on the server.
        srv.wait_stderr(re.compile(r"(?s)(server handshake complete.*){%d}" % len(contract.files)), 5.0, "a handshake per file")
    if t == "chacha20":
        assert "CHACHA20" in client_log, f"client did not use ChaCha20{context}"
        srv.wait_stderr(re.compile("server handshake complete: .*CHACHA20"), 5.0, "a ChaCha20 handshake")
    if t == "keyupdate":
        qlogs = list((logdir / "client-qlog").glob("*"))
        assert any('"trigger":"local_update"' in q.read_text().replace(" ", "") for q in qlogs), (
            f"mpq client's qlog shows no key update it initiated{context}"
        )
    if t in ("resumption", "zerortt"):
        check_resumption(t, client, server, client_log, srv, logdir, context)
    if t == "connectionmigration":
        # The client validated the preferred address and moved; the server followed.
        assert "moved to the server's preferred address" in client_log, f"the client did not move{context}"
        srv.wait_stderr(re.compile(r"the peer moved to another of our addresses"), 5.0, "the server following")
    if t == "http3":
        # Both ends negotiated ALPN h3 (RFC 9114 §3.1): the server logs it at -v.
        srv.wait_stderr(re.compile(r'server handshake complete: .*ALPN "h3"'), 5.0, "an h3 handshake")
    if t == "ecn":
        # The mpq side's qlog: the peer's ACKs count ECN-marked packets of mpq's (mpq marks,
        # the peer reads the marks), and mpq's ACKs count the peer's (and the other way).
        side, qdir = ("client", logdir / "client-qlog") if client == "mpq" else ("server", logdir / "server-qlog")
        deadline = time.monotonic() + 5.0
        while True:
            got, sent = qlog_ack_ecn(qdir)
            if (got and sent) or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        assert got > 0, f"mpq {side}: no ACK from the peer reports ECN-marked packets{context}"
        assert sent > 0, f"mpq {side}: it reported no ECN-marked packet from the peer{context}"
    if t == "longrtt" and client == "mpq":
        # Three PTOs of a 1.5 s round trip are past the 3 s an exiting client waits for its
        # connection to drain (RFC 9000 §10.2 lets it end the closing period with its socket).
        assert "closing period cut short" in client_log, f"mpq client waited out the whole closing period{context}"
    if t == "v2":
        if client == "mpq":
            assert "handshake complete: QUIC v2" in client_log, f"mpq client did not end in v2{context}"
        if server == "mpq":
            srv.wait_stderr(re.compile(r"handshake complete: QUIC v2"), 5.0, "a v2 handshake")


@pytest.mark.mpq
@pytest.mark.parametrize("testcase", UNSUPPORTED)
@pytest.mark.parametrize("role", ["client", "server"])
def test_unsupported_testcase_exits_127(testcase, role, tls_files, tmp_path, logdir):
    require("mpq", role)
    env = endpoint_env(role, testcase, tmp_path, tls_files, 4433, logdir)
    env.update(REQUESTS="https://127.0.0.1:4433/small.bin", DOWNLOADS=str(tmp_path), WWW=str(tmp_path))
    rc, log = run_client(["bash", str(RUN_ENDPOINT)], logdir, env, 10.0)
    assert rc == 127, f"{role} for {testcase}: exit {rc}, not 127\n{log}"
