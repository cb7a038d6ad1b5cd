"""Interoperability tests: mpq against independent QUIC implementations.

Every case starts a server, waits for its "listening on" line, runs a client that
downloads files over HTTP/0.9 (ALPN hq-interop) on real UDP sockets on 127.0.0.1,
compares SHA-256 digests, and kills every process it started. See README.md.

Implementations:
  aioquic  interop/aioquic/hq_{server,client}.py (run with this interpreter)
  quicgo   interop/go/bin/quicgo-peer            (built by setup.sh; $QUICGO_PEER overrides)
  noq      interop/noq-peer/target/release/noq-peer (built by setup.sh; $NOQ_PEER overrides)
  quinn    interop/quinn-peer/target/release/quinn-peer (built by setup.sh; $QUINN_PEER overrides)
  mpq      $MPQ_BIN, else target/release/mpq, else target/debug/mpq

Environment knobs:
  MPQ_BIN                    path of the mpq binary
  INTEROP_REQUIRE_PEERS=1    a missing aioquic / quic-go peer fails instead of skipping
  INTEROP_REQUIRE_MPQ=1      a missing / not-yet-capable mpq fails instead of skipping
  INTEROP_KEEP_LOGS=DIR      copy each case's logs (stderr, keylog, qlog) to DIR/<case>
  INTEROP_MPQ_MULTIPATH=0    skip the multipath cases with mpq as the client
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import certs  # noqa: E402
from resumption import RESUME_ARGS, check_resumption  # noqa: E402

READY_TIMEOUT = 20.0  # seconds for a server to print "listening on"
SHUTDOWN_TIMEOUT = 5.0
LISTENING_RE = re.compile(r"listening on \[?([0-9a-fA-F.:]+?)\]?:(\d+)")
KEY_UPDATE_RE = re.compile(r"^key_update trigger=(local_update|remote_update)", re.M)

# name -> (size in bytes, RNG seed). Files are generated once per session.
FILES = {
    "small.bin": (4 * 1024, 1),
    "1mb.bin": (1024 * 1024, 2),
    "10mb.bin": (10 * 1024 * 1024, 3),
    "50mb.bin": (50 * 1024 * 1024, 4),
    # More small files, for cases with one connection per file.
    "small2.bin": (4 * 1024, 5),
    "small3.bin": (4 * 1024, 6),
}
# The interop runner's multiplexing case: many small files over one connection, more than a
# peer's initial stream limit allows at once.
MULTIPLEXING_FILES = tuple(f"mx{i:03}.bin" for i in range(200))
FILES.update({name: (32 + 7 * i, 1000 + i) for i, name in enumerate(MULTIPLEXING_FILES)})

# aioquic client: request a key update every this many received bytes.
AIOQUIC_KEY_UPDATE_BYTES = 1024 * 1024
# mpq client: --key-update-every N packets.
MPQ_KEY_UPDATE_PACKETS = 2000


# The default pairs (client, server): the peers against each other and mpq in both roles
# against each of them.
PAIRS_V1 = (
    ("aioquic", "quicgo"),
    ("quicgo", "aioquic"),
    ("aioquic", "mpq"),
    ("quicgo", "mpq"),
    ("quinn", "mpq"),
    ("mpq", "aioquic"),
    ("mpq", "quicgo"),
    ("mpq", "quinn"),
)
PAIRS = list(PAIRS_V1)


@dataclass(frozen=True)
class Case:
    name: str
    files: tuple[str, ...]
    timeout: float  # client deadline in seconds
    key_update: bool = False
    # The server validates every client's address with a Retry first (RFC 9000 §8.1.2).
    retry: bool = False
    pairs: tuple[tuple[str, str], ...] | None = None  # default: PAIRS
    # QUIC versions (see VERSION_ARGS): "v2" both sides speak only QUIC v2 (RFC 9369);
    # "upgrade" the client starts in v1 offering v2 and the server moves the connection to
    # v2 by compatible version negotiation (RFC 9368); "vn" the client starts in v2, the
    # v1-only server refuses it (incompatible version negotiation). None: the defaults (v1).
    versions: str | None = None
    # mpq's client migrates to a second local address mid-transfer (--migrate-after-ms).
    migrate: bool = False
    # "resumption": the client fetches the first file in a first connection and the others
    # in a second one that resumes its TLS session; "zerortt": the same, with the second
    # connection's requests in 0-RTT (RFC 9001 §4.6). None: one connection.
    resume: str | None = None
    # The client offers only TLS_CHACHA20_POLY1305_SHA256 (the interop runner's chacha20).
    chacha20: bool = False


# Session resumption and 0-RTT: mpq against the peers, in both roles.
RESUME_PAIRS = (
    ("mpq", "aioquic"), ("aioquic", "mpq"), ("mpq", "quicgo"), ("quicgo", "mpq"), ("mpq", "quinn"), ("quinn", "mpq"),
)

CASES = [
    Case("handshake", ("small.bin",), 20.0),
    Case("transfer_1mb", ("1mb.bin",), 30.0),
    Case("transfer_50mb", ("50mb.bin",), 60.0),
    # 10 MiB is ~9000 packets of 1200 bytes: enough for mpq's --key-update-every 2000,
    # aioquic's update every 1 MiB and quic-go's own first update after 100 packets.
    # (50 MB: an update waits three PTOs after the previous one was acknowledged, RFC 9001
    # §6.5, about 90 ms on loopback; a 10 MB download is over before a second one.)
    Case("keyupdate", ("50mb.bin",), 60.0, key_update=True),
    # mpq's client through aioquic's and quic-go's Retry; mpq's server (--retry always) to
    # both peers.
    Case(
        "retry",
        ("small.bin", "1mb.bin"),
        30.0,
        retry=True,
        pairs=(
            ("mpq", "aioquic"), ("mpq", "quicgo"), ("mpq", "quinn"), ("aioquic", "mpq"), ("quicgo", "mpq"), ("quinn", "mpq"),
        ),
    ),
    # QUIC v2 only, every pair but quinn's (quic-go and aioquic implement RFC 9369; quinn
    # 0.11 speaks v1 only).
    Case("v2", ("small.bin", "1mb.bin"), 30.0, versions="v2", pairs=tuple(p for p in PAIRS_V1 if "quinn" not in p)),
    # ChaCha20-Poly1305 only (the interop runner's chacha20): mpq's client (--cipher) to every
    # server; quinn's client (--chacha20) to mpq's.
    Case(
        "chacha20",
        ("small.bin", "1mb.bin"),
        30.0,
        chacha20=True,
        pairs=(("mpq", "aioquic"), ("mpq", "quicgo"), ("mpq", "quinn"), ("quinn", "mpq")),
    ),
    # Compatible version negotiation v1 -> v2. quic-go does not implement RFC 9368 (no
    # version_information), so only aioquic pairs; mpq's client through aioquic's Retry too
    # would be the same code path, not repeated.
    Case(
        "upgrade_v2",
        ("small.bin", "1mb.bin"),
        30.0,
        versions="upgrade",
        pairs=(("mpq", "aioquic"), ("aioquic", "mpq")),
    ),
    # Incompatible version negotiation (RFC 9368 §2.2): the client starts in v2, the server
    # speaks only v1 and answers with a Version Negotiation packet, the client starts again
    # in v1. mpq's client then needs the server's version_information to confirm the Version
    # Negotiation packet (§4: without it the client MUST close), which quic-go does not
    # send, so mpq -> quic-go ends in VERSION_NEGOTIATION_ERROR by design and is not run.
    Case(
        "vn_v1",
        ("small.bin", "1mb.bin"),
        30.0,
        versions="vn",
        pairs=(("mpq", "aioquic"), ("aioquic", "mpq"), ("quicgo", "mpq")),
    ),
    # Active connection migration (RFC 9000 §9): mpq's client moves its one path from
    # 127.0.0.1 to 127.0.0.2 mid-transfer with a new connection ID; the server validates the
    # new address and sends there. (The peers' clients here have no migration option.) 50 MiB
    # and a move 5 ms after confirmation: a 10 MiB transfer once ended (46 ms on loopback)
    # before quic-go's server had moved.
    # quinn's client moves too (--rebind-to: a new socket on 127.0.0.2), and mpq's server follows.
    Case(
        "migration",
        ("50mb.bin",),
        60.0,
        migrate=True,
        pairs=(("mpq", "aioquic"), ("mpq", "quicgo"), ("mpq", "quinn"), ("quinn", "mpq")),
    ),
    Case("resumption", ("small.bin", "1mb.bin"), 30.0, resume="resumption", pairs=RESUME_PAIRS),
    Case("zerortt", ("small.bin", "1mb.bin"), 30.0, resume="zerortt", pairs=RESUME_PAIRS),
]


# Per implementation and role, the arguments of each `Case.versions` mode. An upgrade
# needs a client that starts in v1 but lists v2 (first: aioquic's server follows the
# client's order) and a server that accepts v2 (mpq's --versions v2,v1 also prefers it).
VERSION_ARGS = {
    ("aioquic", "client", "v2"): ["--versions", "v2"],
    ("aioquic", "server", "v2"): ["--versions", "v2"],
    ("quicgo", "client", "v2"): ["-versions", "v2"],
    ("quicgo", "server", "v2"): ["-versions", "v2"],
    ("mpq", "client", "v2"): ["--quic-version", "v2", "-v"],
    ("mpq", "server", "v2"): ["--quic-version", "v2", "-v"],
    ("aioquic", "client", "upgrade"): ["--versions", "v2,v1", "--original-version", "v1"],
    ("aioquic", "server", "upgrade"): ["--versions", "v2,v1"],
    ("mpq", "client", "upgrade"): ["--versions", "v2,v1", "-v"],
    ("mpq", "server", "upgrade"): ["--versions", "v2,v1", "-v"],
    ("aioquic", "client", "vn"): ["--versions", "v2,v1", "--original-version", "v2"],
    ("aioquic", "server", "vn"): ["--versions", "v1"],
    ("quicgo", "client", "vn"): ["-versions", "v2,v1"],
    ("quicgo", "server", "vn"): ["-versions", "v1"],
    ("mpq", "client", "vn"): ["--versions", "v2,v1", "--quic-version", "v2", "-v"],
    ("mpq", "server", "vn"): ["--versions", "v1", "-v"],
}
# How each implementation reports the negotiated version (mpq at -v: "handshake
# complete: QUIC v2, ..."; the peers: "negotiated quic_version=6b3343cf").
PEER_VERSION_RE = re.compile(r"negotiated quic_version=([0-9a-f]{8})")
MPQ_VERSION_RE = re.compile(r"handshake complete: QUIC (v\d|0x[0-9a-f]+)")
QUIC_V2 = "6b3343cf"
# mpq's server at -v when a client's packets come from a new address (RFC 9000 §9.3).
MPQ_PEER_MOVED_RE = re.compile(r"peer address changed.*to=127\.0\.0\.2:")


def negotiated_versions(impl: str, log: str) -> list[str]:
    """The versions impl's log says its connections negotiated, as 8 hex digits."""
    if impl == "mpq":
        names = {"v1": "00000001", "v2": QUIC_V2}
        return [names.get(v, v.removeprefix("0x").rjust(8, "0")) for v in MPQ_VERSION_RE.findall(log)]
    return PEER_VERSION_RE.findall(log)



def _params():
    for case in CASES:
        for client, server in case.pairs or PAIRS:
            marks = [pytest.mark.mpq] if "mpq" in (client, server) else []
            yield pytest.param(case, client, server, id=f"{case.name}-{client}-{server}", marks=marks)


# --------------------------------------------------------------------------------------
# Implementations


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0", "false", "no")


def find_mpq() -> Path | None:
    env = os.environ.get("MPQ_BIN")
    if env:
        p = Path(env)
        if not p.is_absolute():
            p = REPO / p
        return p if p.is_file() else None
    for p in (REPO / "target/release/mpq", REPO / "target/debug/mpq"):
        if p.is_file():
            return p
    return None


def quicgo_path() -> Path:
    return Path(os.environ.get("QUICGO_PEER", HERE / "go/bin/quicgo-peer"))


def noq_path() -> Path:
    return Path(os.environ.get("NOQ_PEER", HERE / "noq-peer/target/release/noq-peer"))


def quinn_path() -> Path:
    return Path(os.environ.get("QUINN_PEER", HERE / "quinn-peer/target/release/quinn-peer"))


_capability_cache: dict[tuple[str, str], str | None] = {}


def unavailable(impl: str, role: str) -> str | None:
    """None if impl can play role, else the reason why not."""
    key = (impl, role)
    if key in _capability_cache:
        return _capability_cache[key]
    reason: str | None = None
    if impl == "aioquic":
        try:
            import aioquic  # noqa: F401
        except ImportError:
            reason = f"aioquic is not installed for {sys.executable} (run interop/setup.sh)"
    elif impl == "quicgo":
        if not os.access(quicgo_path(), os.X_OK):
            reason = f"quic-go peer not built at {quicgo_path()} (run interop/setup.sh)"
    elif impl == "noq":
        if not os.access(noq_path(), os.X_OK):
            reason = f"noq peer not built at {noq_path()} (run interop/setup.sh)"
    elif impl == "quinn":
        if not os.access(quinn_path(), os.X_OK):
            reason = f"quinn peer not built at {quinn_path()} (run interop/setup.sh)"
    elif impl == "mpq":
        binary = find_mpq()
        if binary is None:
            reason = (
                "mpq binary not found (set MPQ_BIN, or build target/release/mpq or "
                "target/debug/mpq)"
            )
        else:
            # The binary is written in parallel with this suite: only run the cases once
            # it actually has the subcommand (help exits 0 and mentions the flags we use).
            try:
                r = subprocess.run(
                    [str(binary), role, "--help"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                )
                helptext = r.stdout + r.stderr
                needed = ["--listen", "--root"] if role == "server" else ["--output"]
                missing = [f for f in needed if f not in helptext]
                if r.returncode != 0 or missing:
                    reason = (
                        f"{binary} does not support `mpq {role}` yet "
                        f"(`{role} --help` exit {r.returncode}, missing flags {missing})"
                    )
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = f"{binary} {role} --help failed: {exc}"
    else:
        reason = f"unknown implementation {impl}"
    _capability_cache[key] = reason
    return reason


def require(impl: str, role: str) -> None:
    reason = unavailable(impl, role)
    if reason is None:
        return
    strict = _env_flag("INTEROP_REQUIRE_MPQ") if impl == "mpq" else _env_flag("INTEROP_REQUIRE_PEERS")
    if strict:
        pytest.fail(reason)
    pytest.skip(reason)


def server_cmd(
    impl: str,
    port: int,
    root: Path,
    tls: dict[str, Path],
    logdir: Path,
    retry: bool = False,
    versions: str | None = None,
    resume: str | None = None,
) -> list[str]:
    extra = VERSION_ARGS[(impl, "server", versions)] if versions else []
    if resume:
        # mpq and aioquic issue tickets and accept 0-RTT by default; quic-go's early
        # listener is behind a flag. mpq at -v logs each handshake's outcome.
        zero_rtt = {"quicgo": ["-0rtt"], "quinn": ["--0rtt"]}.get(impl, []) if resume == "zerortt" else []
        extra += {"mpq": ["-v"]}.get(impl, zero_rtt)
    return _server_cmd(impl, port, root, tls, logdir, retry) + extra


def _server_cmd(impl: str, port: int, root: Path, tls: dict[str, Path], logdir: Path, retry: bool) -> list[str]:
    keylog = logdir / "server.keylog"
    qlog = logdir / "server-qlog"
    if impl == "aioquic":
        return [
            sys.executable, str(HERE / "aioquic/hq_server.py"),
            "--host", "127.0.0.1", "--port", str(port),
            "--root", str(root), "--cert", str(tls["cert"]), "--key", str(tls["key"]),
            "--secrets-log", str(keylog),
        ] + (["--retry"] if retry else [])
    if impl == "quicgo":
        return [
            str(quicgo_path()), "server",
            "-listen", f"127.0.0.1:{port}",
            "-root", str(root), "-cert", str(tls["cert"]), "-key", str(tls["key"]),
            "-keylog", str(keylog),
        ] + (["-retry"] if retry else [])
    if impl == "quinn":
        return [
            str(quinn_path()), "server",
            "--listen", f"127.0.0.1:{port}",
            "--root", str(root), "--cert", str(tls["cert"]), "--key", str(tls["key"]),
            "--keylog", str(keylog),
        ] + (["--retry"] if retry else [])
    if impl == "mpq":
        return [
            str(find_mpq()), "server",
            "--listen", f"127.0.0.1:{port}",
            "--root", str(root), "--cert", str(tls["cert"]), "--key", str(tls["key"]),
            "--keylog", str(keylog), "--qlog-dir", str(qlog),
            "-v",
        ] + (["--retry", "always"] if retry else [])
    if retry:
        raise ValueError(f"{impl} server: no Retry option in this harness")
    raise ValueError(impl)


def client_cmd(impl: str, urls: list[str], out: Path, tls: dict[str, Path], case: Case) -> list[str]:
    cmd = _client_cmd(impl, urls, out, tls, case)
    if case.resume:
        extra = RESUME_ARGS[(impl, case.resume)]
        cmd = cmd[:2] + extra + cmd[2:] if impl != "aioquic" else cmd + extra
    if case.versions:
        extra = VERSION_ARGS[(impl, "client", case.versions)]
        # quic-go's flag parsing accepts flags anywhere (see client.go); the others too.
        cmd = cmd[:2] + extra + cmd[2:] if impl != "aioquic" else cmd + extra
    return cmd


def _client_cmd(impl: str, urls: list[str], out: Path, tls: dict[str, Path], case: Case) -> list[str]:
    if impl == "aioquic":
        cmd = [
            sys.executable, str(HERE / "aioquic/hq_client.py"), *urls,
            "--output", str(out), "--ca", str(tls["ca"]),
            "--timeout", str(case.timeout),
        ]
        if case.key_update:
            cmd += ["--key-update", str(AIOQUIC_KEY_UPDATE_BYTES)]
        return cmd
    if impl == "quicgo":
        # quic-go initiates a key update by itself after 100 packets: no flag needed.
        return [
            str(quicgo_path()), "client",
            "-output", str(out), "-ca", str(tls["ca"]),
            "-timeout", f"{case.timeout}s", *urls,
        ]
    if impl == "quinn":
        cmd = [
            str(quinn_path()), "client",
            "--output", str(out), "--ca", str(tls["ca"]),
            "--timeout", str(case.timeout), *urls,
        ]
        if case.key_update:
            cmd += ["--key-update-bytes", str(AIOQUIC_KEY_UPDATE_BYTES)]
        if case.chacha20:
            cmd += ["--chacha20"]
        if case.migrate:
            cmd += ["--rebind-to", "127.0.0.2:0", "--rebind-after-ms", "5"]
        return cmd
    if impl == "mpq":
        cmd = [str(find_mpq()), "client", *urls, "--output", str(out), "--ca", str(tls["ca"])]
        if case.resume or case.key_update:
            cmd += ["--qlog-dir", str(out.parent / "logs" / "client-qlog")]
        if case.chacha20:
            cmd += ["--cipher", "chacha20", "-v"]
        if case.retry:
            cmd += ["-v"]  # logs "Retry received", checked below
        if case.key_update:
            cmd += ["--key-update-every", str(MPQ_KEY_UPDATE_PACKETS)]
        if case.migrate:
            cmd += ["--no-multipath", "--local", "127.0.0.1:0", "--local", "127.0.0.2:0", "--migrate-after-ms", "5", "-v"]
        return cmd
    raise ValueError(impl)


# --------------------------------------------------------------------------------------
# Process management


class Server:
    """A server process whose stdout is watched for the "listening on" line."""

    def __init__(self, cmd: list[str], logdir: Path, env: dict[str, str]) -> None:
        self.cmd = cmd
        self.stdout_path = logdir / "server.stdout"
        self.stderr_path = logdir / "server.stderr"
        self._stderr = open(self.stderr_path, "wb")
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,  # own process group: stop() can signal it as a whole
        )
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with open(self.stdout_path, "w") as log:
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace")
                log.write(line)
                log.flush()
                self._lines.put(line)
        self._lines.put(None)

    def wait_stdout(self, pattern: re.Pattern[str], timeout: float, what: str) -> re.Match[str]:
        """Block until a stdout line matches pattern (lines are consumed); return the match."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"server did not print {what} within {timeout}s\n{self.describe()}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(timeout=SHUTDOWN_TIMEOUT)
                raise AssertionError(
                    f"server exited (code {self.proc.returncode}) before printing {what}\n{self.describe()}"
                )
            m = pattern.search(line)
            if m:
                return m

    def wait_listening(self, timeout: float = READY_TIMEOUT) -> int:
        """Block until the server prints "listening on HOST:PORT"; return PORT."""
        return int(self.wait_stdout(LISTENING_RE, timeout, "'listening on'").group(2))

    def wait_stderr(self, pattern: re.Pattern[str], timeout: float, what: str) -> re.Match[str]:
        """Block until the server's stderr (a file) has a line matching pattern.

        stderr goes straight to a file so that nothing can block the server; this re-reads
        the file every 50 ms until the line is there or the deadline passes.
        """
        deadline = time.monotonic() + timeout
        while True:
            m = pattern.search(self.stderr())
            if m:
                return m
            if time.monotonic() >= deadline:
                raise AssertionError(f"server did not print {what} within {timeout}s\n{self.describe()}")
            if self.proc.poll() is not None:
                # One last read: the process may have written the line as it exited.
                m = pattern.search(self.stderr())
                if m:
                    return m
                raise AssertionError(
                    f"server exited (code {self.proc.returncode}) before printing {what}\n{self.describe()}"
                )
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, SHUTDOWN_TIMEOUT), (signal.SIGKILL, SHUTDOWN_TIMEOUT)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._reader.join(timeout=SHUTDOWN_TIMEOUT)
        self._stderr.close()

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def describe(self) -> str:
        return f"$ {' '.join(self.cmd)}\n--- server stderr (tail) ---\n{tail(self.stderr())}"


def run_client(cmd: list[str], logdir: Path, env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """Run a client to completion (or kill it after timeout). Returns (exit code, stderr+stdout)."""
    out_path = logdir / "client.log"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=SHUTDOWN_TIMEOUT)
    return rc, out_path.read_text(errors="replace")


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------------------
# Fixtures


def check_download(rc, case, out: Path, digests: dict[str, str], srv, context: str) -> None:
    """The client exited 0 within its time, every file of `case` arrived whole (size and
    SHA-256), and the server is still running."""
    assert rc is not None, f"client timed out after {case.timeout}s{context}"
    assert rc == 0, f"client exited with {rc}{context}"
    for name in case.files:
        got = out / name
        assert got.is_file(), f"{name} was not downloaded{context}"
        assert got.stat().st_size == FILES[name][0], f"{name}: size {got.stat().st_size} != {FILES[name][0]}{context}"
        assert sha256(got) == digests[name], f"{name}: SHA-256 mismatch{context}"
    assert srv.alive(), f"server exited (code {srv.proc.returncode}) during the test{context}"


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory) -> dict[str, Path]:
    return certs.generate(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def www(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Directory of seeded pseudo-random files and their SHA-256 digests."""
    root = tmp_path_factory.mktemp("www")
    digests = {}
    for name, (size, seed) in FILES.items():
        data = random.Random(seed).randbytes(size)
        (root / name).write_bytes(data)
        digests[name] = hashlib.sha256(data).hexdigest()
    return root, digests


@pytest.fixture
def free_udp_port() -> int:
    """A UDP port on 127.0.0.1 that was free a moment ago (the server binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def logdir(tmp_path, request) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    yield d
    keep = os.environ.get("INTEROP_KEEP_LOGS")
    if keep:
        dest = Path(keep) / re.sub(r"[^\w.-]+", "_", request.node.name)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(d, dest)


@pytest.fixture
def start_server(logdir):
    started: list[Server] = []

    def start(cmd: list[str], env: dict[str, str]) -> Server:
        srv = Server(cmd, logdir, env)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


# --------------------------------------------------------------------------------------
# The test


@pytest.mark.parametrize("case,client,server", list(_params()))
def test_interop(case: Case, client: str, server: str, tls_files, www, free_udp_port, logdir, start_server, tmp_path):
    require(server, "server")
    require(client, "client")
    root, digests = www
    out = tmp_path / "downloads"
    out.mkdir()

    env = dict(os.environ)
    env.pop("SSLKEYLOGFILE", None)
    env["QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    server_env = dict(env)
    client_env = dict(env, SSLKEYLOGFILE=str(logdir / "client.keylog"))

    srv = start_server(
        server_cmd(server, free_udp_port, root, tls_files, logdir, case.retry, case.versions, case.resume), server_env
    )
    port = srv.wait_listening()

    urls = [f"https://127.0.0.1:{port}/{name}" for name in case.files]
    cmd = client_cmd(client, urls, out, tls_files, case)
    started = time.monotonic()
    rc, client_log = run_client(cmd, logdir, client_env, case.timeout)
    elapsed = time.monotonic() - started

    context = (
        f"\n$ {' '.join(cmd)}\n--- client output (tail) ---\n{tail(client_log)}\n{srv.describe()}"
    )
    check_download(rc, case, out, digests, srv, context)

    if client != "mpq":
        assert "handshake completed alpn=hq-interop" in client_log, f"client did not report ALPN hq-interop{context}"

    if case.key_update:
        check_key_update(client, server, client_log, srv, logdir, context)

    if case.versions:
        # Both sides say they ended up in the expected version (v2; v1 after a Version
        # Negotiation packet): the client on its log, the server on stderr.
        want, want_name = ("00000001", "v1") if case.versions == "vn" else (QUIC_V2, "v2")
        for impl, log in ((client, client_log), (server, srv.stderr())):
            got = negotiated_versions(impl, log)
            assert got and all(v == want for v in got), f"{impl} negotiated {got}, not {want_name}{context}"
        if case.versions == "vn" and client == "mpq":
            assert "incompatible version negotiation: v2 -> v1" in client_log, f"mpq client did not start again{context}"
        if case.versions == "vn" and server == "mpq":
            # The peer's client really started in v2 and was refused.
            assert "Version Negotiation sent: v2 refused" in srv.stderr(), f"mpq server sent no VN for v2{context}"
        if case.versions == "upgrade":
            # ... after starting in v1: mpq logs the switch at -v on either side.
            for impl, log in ((client, client_log), (server, srv.stderr())):
                if impl == "mpq":
                    assert "compatible version negotiation: v1 -> v2" in log, f"mpq {impl} log shows no upgrade{context}"

    if case.retry:
        # The handshake really went through a Retry (mpq logs it at -v on either side).
        if client == "mpq":
            assert "Retry received" in client_log, f"mpq client saw no Retry{context}"
        if server == "mpq":
            assert "Retry sent" in srv.stderr(), f"mpq server sent no Retry{context}"

    if case.resume:
        check_resumption(case.resume, client, server, client_log, srv, logdir, context)

    if case.chacha20:
        # mpq at -v names the negotiated suite, on whichever side it is.
        mpq_log = client_log if client == "mpq" else srv.stderr()
        assert "TLS13_CHACHA20_POLY1305_SHA256" in mpq_log, f"mpq did not negotiate ChaCha20-Poly1305{context}"

    if case.migrate:
        check_migration(client, server, client_log, srv, context)

    print(f"{case.name} {client}->{server}: {elapsed:.2f}s")


def check_migration(client: str, server: str, client_log: str, srv: Server, context: str) -> None:
    """The client moved to 127.0.0.2 mid-transfer and the server followed."""
    if client == "mpq":
        # Datagrams from the server arrived at the new address.
        assert "migrated to 127.0.0.2" in client_log, f"mpq client did not migrate{context}"
        assert "migration followed" in client_log, f"the server kept sending to the old address{context}"
    elif client == "quinn":
        assert "rebound to 127.0.0.2" in client_log, f"quinn client did not move{context}"
    if server == "mpq":
        srv.wait_stderr(MPQ_PEER_MOVED_RE, 5.0, "the client's move to 127.0.0.2")


def check_key_update(client: str, server: str, client_log: str, srv: Server, logdir: Path, context: str) -> None:
    """Assert a 1-RTT key update happened and was answered.

    The peers print "key_update trigger=local_update|remote_update" on stderr; mpq's side
    is read from its qlog (`security:key_updated`), and so is quinn's, which reports no key
    updates (its client only says it asked for one). The client is always the one asked to
    initiate: aioquic via --key-update, quinn via --key-update-bytes, mpq via
    --key-update-every, quic-go by its built-in first key update after 100 packets.
    """
    client_triggers = KEY_UPDATE_RE.findall(client_log)
    if client in ("aioquic", "quinn"):
        assert "local_update" in client_triggers, f"{client} client did not initiate a key update{context}"
    elif client == "quicgo":
        # quic-go initiates after 100 packets unless the server updated first.
        assert client_triggers, f"quic-go client saw no key update{context}"
    elif client == "mpq" and server == "quinn":
        # quinn reports nothing: mpq's qlog shows its update, and the download that went on
        # past it (its ACKs in the new phase) shows quinn followed. (A second update waits
        # three PTOs after quinn acknowledged the first, RFC 9001 §6.5: about 90 ms, which
        # a 50 MB download over loopback outlasts only some of the time.)
        updates = qlog_key_updates(logdir / "client-qlog", "local_update")
        assert updates >= 1, f"mpq client's qlog shows no key update{context}"
    if server == "mpq":
        if client == "quinn":
            srv_dir = logdir / "server-qlog"
            deadline = time.monotonic() + 5.0
            while not qlog_key_updates(srv_dir, "remote_update") and time.monotonic() < deadline:
                time.sleep(0.1)
            assert qlog_key_updates(srv_dir, "remote_update"), f"mpq server never followed quinn's key update{context}"
    elif server != "quinn":
        # The server's stderr is written as packets are processed; the client only exits
        # after the whole file arrived, so the server has logged the update by now.
        server_triggers = KEY_UPDATE_RE.findall(srv.stderr())
        assert "remote_update" in server_triggers, (
            f"{server} server never followed a key update initiated by the {client} client{context}"
        )


def qlog_key_updates(qlog_dir: Path, trigger: str) -> int:
    """How many 1-RTT key updates with `trigger` mpq's qlog files in qlog_dir record (one
    `security:key_updated` per direction's key: the client's secret is counted)."""
    n = 0
    for f in qlog_dir.glob("*") if qlog_dir.is_dir() else []:
        for line in f.read_text(errors="replace").splitlines():
            if "security:key_updated" in line and trigger in line and "client_1rtt_secret" in line:
                n += 1
    return n
