"""HTTP/3 (RFC 9114, ALPN h3) interop cases: mpq's `server --http3` and `client --http3`
(the h3 crate on mpq's application API) against aioquic's H3Connection, quic-go's http3
package and ngtcp2's HTTP/3 examples (Debian's ngtcp2-client / ngtcp2-server), in both
roles; mpq against itself over two paths in the per-path runtime; a missing file answered
404. The shared machinery is in test_interop.py. Run with interop/run.sh."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_interop import (  # noqa: F401  (free_udp_port, logdir, start_server, tls_files, www are fixtures)
    FILES,
    HERE,
    _env_flag,
    check_download,
    find_mpq,
    free_udp_port,
    logdir,
    quicgo_path,
    require,
    run_client,
    start_server,
    tail,
    tls_files,
    www,
)

IMPLS = ("mpq", "aioquic", "quicgo", "ngtcp2")


def ngtcp2_client() -> str | None:
    return shutil.which("gtlsclient") or shutil.which("gtlsclient", path="/usr/bin:/usr/sbin")


def ngtcp2_server() -> str | None:
    return shutil.which("gtlsserver") or shutil.which("gtlsserver", path="/usr/sbin:/usr/bin")


def require_impl(impl: str, role: str) -> None:
    """Skips (or fails, with INTEROP_REQUIRE_PEERS=1) when `impl` cannot play `role`."""
    if impl != "ngtcp2":
        require(impl, role)
        return
    found = ngtcp2_client() if role == "client" else ngtcp2_server()
    if found is None:
        reason = f"ngtcp2 {role} not installed (Debian's ngtcp2-{role}; interop/setup.sh installs it as root)"
        if _env_flag("INTEROP_REQUIRE_PEERS"):
            pytest.fail(reason)
        pytest.skip(reason)


@dataclass(frozen=True)
class Case:
    name: str
    client: str
    server: str
    files: tuple[str, ...] = ("small.bin", "10mb.bin")
    timeout: float = 40.0
    # mpq on both sides, two paths (127.0.0.1 and 127.0.0.2) in the per-path runtime.
    multipath: bool = False
    # The server offers 127.0.0.2:<another port> in preferred_address (RFC 9000 §9.6); the
    # client moves there, and the server follows.
    preferred: bool = False
    # The client moves to a new local port 20 ms after the handshake (RFC 9000 §9), the
    # server follows.
    migrate: bool = False
    # mpq in the API's shard runtime (--shard N): a server's shards share its port, a
    # client opens one connection per shard and hands the URLs out.
    shard: int = 0
    # More options for the client's and the server's command (implementation-specific).
    client_args: tuple[str, ...] = ()
    server_args: tuple[str, ...] = ()
    # A regular expression the mpq side's output must match (its -v log and its JSON
    # summary: the client's output, or the server's stderr).
    mpq_shows: str | None = None


# ngtcp2 (GnuTLS) offering only ChaCha20-Poly1305, and how mpq's -v handshake line names it.
CHACHA20_ONLY = "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305"
CHACHA20_SHOWN = r"handshake complete: .*TLS13_CHACHA20_POLY1305_SHA256"

CASES = [Case("http3", c, s) for c, s in (
    ("mpq", "mpq"),
    ("mpq", "aioquic"), ("aioquic", "mpq"),
    ("mpq", "quicgo"), ("quicgo", "mpq"),
    ("mpq", "ngtcp2"), ("ngtcp2", "mpq"),
    # The harness's own check: two peers that do not involve mpq.
    ("aioquic", "quicgo"),
)] + [
    Case("http3_multipath", "mpq", "mpq", multipath=True),
    # Migration against an implementation no one here wrote: ngtcp2's client follows a
    # preferred_address by default and has --change-local-addr; its server offers one with
    # --preferred-ipv4-addr. mpq's client moves there on a connection without multipath.
    Case("http3_preferred_address", "ngtcp2", "mpq", files=("small.bin", "50mb.bin"), preferred=True),
    Case("http3_preferred_address", "mpq", "ngtcp2", files=("small.bin", "50mb.bin"), preferred=True),
    Case("http3_preferred_address", "mpq", "mpq", files=("small.bin", "50mb.bin"), preferred=True),
    Case("http3_migration", "ngtcp2", "mpq", files=("small.bin", "50mb.bin"), migrate=True),
    # ngtcp2's examples can update keys, restrict the cipher suites and drop packets at
    # random: each against mpq, mpq's side checked in its output. (Not its --nat-rebinding:
    # its client then sends nothing from the new port until it has something to send, which
    # a downloading client never has, and ignores what arrives at the old one.)
    Case("http3_keyupdate", "ngtcp2", "mpq", client_args=("--key-update=20ms",), mpq_shows=r'"key_updates":[1-9]'),
    Case("http3_keyupdate", "mpq", "ngtcp2", client_args=("--key-update-every", "300"), mpq_shows=r'"key_updates":[1-9]'),
    Case("http3_chacha20", "ngtcp2", "mpq", client_args=(f"--ciphers={CHACHA20_ONLY}",), mpq_shows=CHACHA20_SHOWN),
    Case("http3_chacha20", "mpq", "ngtcp2", client_args=("--cipher", "chacha20"), mpq_shows=CHACHA20_SHOWN),
    # 5 % of the datagrams lost each way at the ngtcp2 end, with key updates on top (an
    # update of mpq's whose packets were lost once left it unable to open the peer's).
    Case("http3_loss", "ngtcp2", "mpq", client_args=("-r", "0.05", "-t", "0.05", "--key-update=20ms"),
         mpq_shows=r'"lost_packets":[1-9]'),
    # (mpq's client sends few packets besides ACKs, which are never declared lost: its
    # updates are what is checked.)
    Case("http3_loss", "mpq", "ngtcp2", client_args=("--key-update-every", "300"), server_args=("-r", "0.05", "-t", "0.05"),
         mpq_shows=r'"key_updates":[1-9]'),
    Case("http3_shard", "aioquic", "mpq", shard=2),
    Case("http3_shard", "quicgo", "mpq", shard=2),
    Case("http3_shard", "mpq", "quicgo", shard=2),
]


def free_port(host: str) -> int:
    """A UDP port on `host` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def server_cmd(impl: str, port: int, root: Path, tls: dict[str, Path], logdir: Path, case: Case | None) -> list[str]:
    keylog = logdir / "server.keylog"
    if impl == "mpq":
        cmd = [
            str(find_mpq()), "server", "--http3", "--listen", f"127.0.0.1:{port}", "--root", str(root),
            "--cert", str(tls["cert"]), "--key", str(tls["key"]),
            "--keylog", str(keylog), "--qlog-dir", str(logdir / "server-qlog"), "-v",
        ]
        if case and case.preferred:
            cmd += ["--preferred-address", f"127.0.0.2:{free_port('127.0.0.2')}"]
        if case and case.shard:
            cmd += ["--shard", str(case.shard)]
        cmd += list(case.server_args) if case else []
        return cmd + (["--threads", "per-path"] if case and case.multipath else [])
    if impl == "aioquic":
        return [
            sys.executable, str(HERE / "aioquic/h3_server.py"), "--host", "127.0.0.1", "--port", str(port),
            "--root", str(root), "--cert", str(tls["cert"]), "--key", str(tls["key"]), "--secrets-log", str(keylog),
        ]
    if impl == "quicgo":
        return [
            str(quicgo_path()), "server", "-http3", "-listen", f"127.0.0.1:{port}", "-root", str(root),
            "-cert", str(tls["cert"]), "-key", str(tls["key"]), "-keylog", str(keylog),
        ]
    if impl == "ngtcp2":
        cmd = [
            sys.executable, str(HERE / "ngtcp2/serve.py"), "127.0.0.1", str(port),
            str(tls["key"]), str(tls["cert"]), str(root),
        ]
        if case and case.preferred:
            cmd += [f"--preferred-ipv4-addr=127.0.0.2:{free_port('127.0.0.2')}"]
        return cmd + (list(case.server_args) if case else [])
    raise ValueError(impl)


def client_cmd(impl: str, port: int, files: tuple[str, ...], out: Path, tls: dict[str, Path], case: Case) -> list[str]:
    urls = [f"https://127.0.0.1:{port}/{name}" for name in files]
    if impl == "mpq":
        cmd = [
            str(find_mpq()), "client", "--http3", *urls, "--output", str(out), "--ca", str(tls["ca"]),
            "--timeout", str(int(case.timeout)), "--json", "--qlog-dir", str(out.parent / "logs" / "client-qlog"),
        ]
        if case.multipath:
            cmd += ["--threads", "per-path", "--local", "127.0.0.1:0", "--local", "127.0.0.2:0"]
        if case.preferred:
            # (A connection with multipath would open a path there instead: not yet.)
            cmd += ["--no-multipath", "-v"]
        if case.shard:
            cmd += ["--shard", str(case.shard)]
        if case.mpq_shows:
            cmd.append("-v")
        return cmd + list(case.client_args)
    if impl == "aioquic":
        return [
            sys.executable, str(HERE / "aioquic/h3_client.py"), *urls, "--output", str(out),
            "--ca", str(tls["ca"]), "--timeout", str(case.timeout),
        ]
    if impl == "quicgo":
        return [
            str(quicgo_path()), "client", "-http3", "-output", str(out), "-ca", str(tls["ca"]),
            "-timeout", f"{case.timeout}s", *urls,
        ]
    if impl == "ngtcp2":
        # (ngtcp2's example client does not verify the server's certificate.)
        cmd = [
            str(ngtcp2_client()), "--quiet", "--exit-on-all-streams-close", "--download", str(out),
            "--timeout", f"{int(case.timeout)}s", "127.0.0.1", str(port), *urls,
        ]
        cmd = cmd[:1] + list(case.client_args) + cmd[1:]
        return cmd[:1] + ["--change-local-addr=20ms"] + cmd[1:] if case.migrate else cmd
    raise ValueError(impl)


def _env(logdir: Path) -> tuple[dict[str, str], dict[str, str]]:
    env = dict(os.environ)
    env.pop("SSLKEYLOGFILE", None)
    env["QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return dict(env), dict(env, SSLKEYLOGFILE=str(logdir / "client.keylog"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.name}-{c.client}-{c.server}" for c in CASES])
def test_http3(case: Case, tls_files, www, free_udp_port, logdir, start_server, tmp_path):
    require_impl(case.server, "server")
    require_impl(case.client, "client")
    root, digests = www
    out = tmp_path / "downloads"
    out.mkdir()
    server_env, client_env = _env(logdir)
    srv = start_server(server_cmd(case.server, free_udp_port, root, tls_files, logdir, case), server_env)
    port = srv.wait_listening()
    cmd = client_cmd(case.client, port, case.files, out, tls_files, case)
    rc, log = run_client(cmd, logdir, client_env, case.timeout)
    context = f"\n$ {' '.join(cmd)}\n--- client output (tail) ---\n{tail(log)}\n{srv.describe()}"
    check_download(rc, case, out, digests, srv, context)
    if case.client == "mpq":
        summary = json.loads(log.strip().splitlines()[-1]) if log.strip().startswith("{") else _last_json(log)
        assert summary["http3"] is True and summary["bytes"] == sum(FILES[f][0] for f in case.files), f"{summary}{context}"
        if case.multipath:
            rx = [p["rx_bytes"] for p in summary["paths"]]
            assert summary["multipath"] and len(rx) == 2, f"not two paths: {summary['paths']}{context}"
            assert all(b > 100_000 for b in rx), f"a path carried almost nothing: {rx}{context}"
        assert list((out.parent / "logs" / "client-qlog").glob("*.sqlog")), f"no client qlog{context}"
        if case.shard:
            assert summary["connections"] == case.shard, f"one connection per shard: {summary}{context}"
    if case.server == "mpq":
        assert list((logdir / "server-qlog").glob("*.sqlog")), f"no server qlog{context}"
    if case.preferred and case.client == "mpq":
        assert "moved to the server's preferred address" in log, f"mpq's client did not move{context}"
    if case.preferred and case.server == "mpq":
        # The client moved to the preferred address and the server's path followed (-v).
        srv.wait_stderr(re.compile(r"the peer moved to another of our addresses.*127\.0\.0\.2"), 5.0, "the move")
    if case.migrate:
        srv.wait_stderr(re.compile(r"peer address changed"), 5.0, "the client's new address")
    if case.mpq_shows and case.client == "mpq":
        assert re.search(case.mpq_shows, log), f"no {case.mpq_shows!r} in mpq's output{context}"
    elif case.mpq_shows:
        srv.wait_stderr(re.compile(case.mpq_shows), 5.0, f"{case.mpq_shows!r}")


def _last_json(log: str) -> dict:
    """The client's --json summary: the last line of its output that is a JSON object."""
    for line in reversed(log.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON summary in the client's output:\n{tail(log)}")


@pytest.mark.parametrize("server", ("mpq", "aioquic", "quicgo", "ngtcp2"))
def test_http3_missing_file_is_404(server, tls_files, www, free_udp_port, logdir, start_server, tmp_path):
    """mpq's client fails with the status when the server has no such file; with mpq as the
    server, the peers' clients are answered 404 too (they fail)."""
    require_impl(server, "server")
    require_impl("mpq", "client")
    root, _ = www
    server_env, client_env = _env(logdir)
    srv = start_server(server_cmd(server, free_udp_port, root, tls_files, logdir, None), server_env)
    port = srv.wait_listening()
    case = Case("http3_404", "mpq", server, files=("no-such-file.bin",), timeout=20.0)
    cmd = client_cmd("mpq", port, case.files, tmp_path / "out", tls_files, case)
    rc, log = run_client(cmd, logdir, client_env, case.timeout)
    context = f"\n$ {' '.join(cmd)}\n--- client output (tail) ---\n{tail(log)}\n{srv.describe()}"
    assert rc == 1, f"mpq client exited with {rc}, not 1{context}"
    assert "GET /no-such-file.bin: 404" in log, f"mpq client did not report the 404{context}"
    assert srv.alive(), f"the server exited{context}"
