"""Helpers shared by the aioquic hq-interop peers (hq_server.py, hq_client.py)."""
from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TextIO

from aioquic.quic import crypto as _crypto
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.logger import QuicFileLogger
from aioquic.quic.packet import QuicProtocolVersion

ALPN = "hq-interop"

# Flow-control windows: aioquic defaults to 1 MiB, which throttles the 50 MB case.
MAX_DATA = 16 * 1024 * 1024
MAX_STREAM_DATA = 16 * 1024 * 1024

KEY_UPDATES = {"local_update": 0, "remote_update": 0}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def install_key_update_probe() -> None:
    """Report every 1-RTT key update on stderr.

    aioquic has no public hook for this, so wrap CryptoPair._update_key, which is
    called with trigger "local_update" (we initiated: request_key_update) or
    "remote_update" (the peer flipped the key phase bit and we followed).
    The harness greps stderr for lines starting with "key_update ".
    """
    original = _crypto.CryptoPair._update_key
    if getattr(original, "_mpq_probe", False):
        return

    def probe(self: _crypto.CryptoPair, trigger: str) -> None:
        original(self, trigger)
        KEY_UPDATES[trigger] = KEY_UPDATES.get(trigger, 0) + 1
        log(f"key_update trigger={trigger} key_phase={self.send.key_phase}")

    probe._mpq_probe = True  # type: ignore[attr-defined]
    _crypto.CryptoPair._update_key = probe  # type: ignore[method-assign]


def parse_version(name: str) -> int:
    """"v1", "v2" (RFC 9369) or a hex number, as the harness passes versions."""
    name = name.strip().lower()
    named = {"v1": QuicProtocolVersion.VERSION_1, "v2": QuicProtocolVersion.VERSION_2}
    return int(named[name]) if name in named else int(name, 16)


def log_version(quic) -> None:
    """Report the negotiated version: aioquic has no public accessor, `_version` holds it."""
    log(f"negotiated quic_version={quic._version:08x}")  # noqa: SLF001


def add_server_args(parser: argparse.ArgumentParser) -> None:
    """The file servers' address, directory and certificate options."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=4433, help="UDP port (0: pick one)")
    parser.add_argument("--root", required=True, help="directory to serve")
    parser.add_argument("--cert", required=True, help="PEM certificate (chain)")
    parser.add_argument("--key", required=True, help="PEM private key")


def add_client_args(parser: argparse.ArgumentParser) -> None:
    """The clients' URLs, output directory and certificate check."""
    parser.add_argument("urls", nargs="+", metavar="URL", help="https://HOST:PORT/name")
    parser.add_argument("--output", required=True, help="directory to write downloads to")
    tls = parser.add_mutually_exclusive_group()
    tls.add_argument("--insecure", action="store_true", help="do not verify the server certificate")
    tls.add_argument("--ca", metavar="FILE", help="PEM CA file to verify the server certificate")


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--secrets-log",
        metavar="FILE",
        help="append TLS secrets to FILE in SSLKEYLOGFILE format",
    )
    parser.add_argument("--qlog-dir", metavar="DIR", help="write qlog traces to DIR")
    parser.add_argument(
        "--idle-timeout", type=float, default=30.0, help="QUIC idle timeout in seconds"
    )
    parser.add_argument(
        "--versions",
        metavar="LIST",
        help="QUIC versions in order of preference, e.g. v2,v1 (default: aioquic's, v1,v2); "
        "a client starts in --original-version, else the first",
    )
    parser.add_argument(
        "--original-version",
        metavar="VERSION",
        help="client: the version of the first Initial (compatible version negotiation, RFC 9368)",
    )
    parser.add_argument(
        "--max-datagram-size",
        type=int,
        default=1200,
        help="max UDP payload aioquic sends (default: 1200, the QUIC minimum)",
    )


def base_configuration(args: argparse.Namespace, is_client: bool) -> tuple[QuicConfiguration, TextIO | None]:
    secrets: TextIO | None = None
    config = QuicConfiguration(
        is_client=is_client,
        alpn_protocols=[ALPN],
        idle_timeout=args.idle_timeout,
        max_data=MAX_DATA,
        max_stream_data=MAX_STREAM_DATA,
        max_datagram_size=args.max_datagram_size,
    )
    if args.versions:
        config.supported_versions = [parse_version(v) for v in args.versions.split(",")]
    if args.original_version:
        config.original_version = parse_version(args.original_version)
    if args.secrets_log:
        secrets = open(args.secrets_log, "a")
        config.secrets_log_file = secrets
    if args.qlog_dir:
        config.quic_logger = QuicFileLogger(args.qlog_dir)
    return config, secrets


async def announce_and_serve(server) -> int:
    """Prints the server's "listening on HOST:PORT" line (the harness waits for it), then
    serves until SIGINT or SIGTERM."""
    sockname = server._transport.get_extra_info("sockname")  # noqa: SLF001 - no public accessor
    host, port = sockname[0], sockname[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"listening on {shown}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    return 0
