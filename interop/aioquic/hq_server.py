#!/usr/bin/env python3
"""HTTP/0.9 (ALPN hq-interop) file server on aioquic.

Request: a client-initiated bidirectional stream carrying "GET /name\r\n" (FIN optional).
Response: the bytes of ROOT/name followed by FIN. Unknown files / bad requests get the
stream reset (RESET_STREAM + STOP_SENDING, error code 0x10).

Prints "listening on HOST:PORT" on stdout once the UDP socket is bound, then serves
until killed (SIGTERM/SIGINT). Key updates are reported on stderr ("key_update ...").
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aioquic.asyncio import QuicConnectionProtocol, serve  # noqa: E402
from aioquic.quic.events import (  # noqa: E402
    ConnectionTerminated,
    HandshakeCompleted,
    QuicEvent,
    StreamDataReceived,
)

from common import (  # noqa: E402
    add_common_args,
    add_server_args,
    announce_and_serve,
    base_configuration,
    install_key_update_probe,
    log,
    log_version,
)

ERR_REQUEST = 0x10
MAX_REQUEST = 4096


def resolve(root: Path, target: str) -> Path | None:
    """Map "/name" to a file under root, refusing anything that escapes root."""
    target = target.split("?", 1)[0].split("#", 1)[0]
    if not target.startswith("/"):
        return None
    candidate = (root / target.lstrip("/")).resolve()
    try:
        candidate.relative_to(root)
    except ValueError:
        return None
    return candidate if candidate.is_file() else None


class HqServerProtocol(QuicConnectionProtocol):
    def __init__(self, *args, root: Path, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._root = root
        self._requests: dict[int, bytearray] = {}
        self._done: set[int] = set()

    def _reject(self, stream_id: int, why: str) -> None:
        log(f"stream {stream_id}: rejecting request: {why}")
        self._done.add(stream_id)
        self._requests.pop(stream_id, None)
        self._quic.reset_stream(stream_id, ERR_REQUEST)
        try:
            self._quic.stop_stream(stream_id, ERR_REQUEST)
        except Exception:  # stream may already be finished on the receive side
            pass

    def _handle(self, stream_id: int, raw: bytes) -> None:
        self._done.add(stream_id)
        line = raw.split(b"\r\n", 1)[0].split(b"\n", 1)[0].decode("ascii", "replace").strip()
        if not line.startswith("GET /"):
            self._reject(stream_id, f"not an HTTP/0.9 GET: {line!r}")
            return
        target = line[4:].split(" ", 1)[0]
        path = resolve(self._root, target)
        if path is None:
            self._reject(stream_id, f"no such file: {target!r}")
            return
        data = path.read_bytes()
        log(f"stream {stream_id}: GET {target} -> {len(data)} bytes")
        self._quic.send_stream_data(stream_id, data, end_stream=True)

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            log(
                f"handshake completed alpn={event.alpn_protocol} resumed={event.session_resumed} "
                f"early_data_accepted={event.early_data_accepted}"
            )
            log_version(self._quic)
        elif isinstance(event, ConnectionTerminated):
            log(
                f"connection terminated error_code={event.error_code:#x} "
                f"frame_type={event.frame_type} reason={event.reason_phrase!r}"
            )
        elif isinstance(event, StreamDataReceived):
            sid = event.stream_id
            if sid in self._done:
                return
            if sid % 4 != 0:  # only client-initiated bidirectional streams carry requests
                self._reject(sid, "request on a non client-bidi stream")
                self.transmit()
                return
            if not self._quic._handshake_complete:  # noqa: SLF001 - no public accessor
                # Stream data before the handshake completed: it came in 0-RTT packets.
                log(f"stream {sid}: request data in 0-RTT")
            buf = self._requests.setdefault(sid, bytearray())
            buf += event.data
            if b"\n" in buf or event.end_stream:
                self._handle(sid, bytes(self._requests.pop(sid)))
            elif len(buf) > MAX_REQUEST:
                self._reject(sid, "request too long")
            self.transmit()


class TicketStore:
    """Session tickets this server issued, each handed out once: a ticket (and its 0-RTT)
    cannot be replayed (RFC 8446 §8.1)."""

    def __init__(self) -> None:
        self.tickets: dict[bytes, object] = {}

    def add(self, ticket) -> None:
        self.tickets[ticket.ticket] = ticket

    def pop(self, label: bytes):
        return self.tickets.pop(label, None)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_args(parser)
    parser.add_argument(
        "--retry",
        action="store_true",
        help="send a Retry to every new client first (address validation, RFC 9000 §8.1.2)",
    )
    add_common_args(parser)
    args = parser.parse_args()

    install_key_update_probe()
    config, _secrets = base_configuration(args, is_client=False)
    config.load_cert_chain(args.cert, args.key)
    root = Path(args.root).resolve()

    tickets = TicketStore()
    server = await serve(
        args.host,
        args.port,
        configuration=config,
        create_protocol=partial(HqServerProtocol, root=root),
        retry=args.retry,
        session_ticket_fetcher=tickets.pop,
        session_ticket_handler=tickets.add,
    )
    return await announce_and_serve(server)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
