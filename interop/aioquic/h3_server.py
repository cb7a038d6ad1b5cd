#!/usr/bin/env python3
"""HTTP/3 (RFC 9114, ALPN h3) file server on aioquic's H3Connection.

GET and HEAD of ROOT/name answer 200 with the file (content-length set); anything else is
404. Prints "listening on HOST:PORT" on stdout once the UDP socket is bound, then serves
until killed (SIGTERM/SIGINT). The handshake is reported on stderr ("handshake completed
alpn=h3").
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
from aioquic.h3.connection import H3_ALPN, H3Connection  # noqa: E402
from aioquic.h3.events import HeadersReceived  # noqa: E402
from aioquic.quic.events import HandshakeCompleted, ProtocolNegotiated, QuicEvent  # noqa: E402

from common import add_common_args, add_server_args, announce_and_serve, base_configuration, log, log_version  # noqa: E402
from hq_server import resolve  # noqa: E402


class H3ServerProtocol(QuicConnectionProtocol):
    def __init__(self, *args, root: Path, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._root = root
        self._http: H3Connection | None = None

    def _answer(self, stream_id: int, headers: dict[bytes, bytes]) -> None:
        assert self._http is not None
        method = headers.get(b":method", b"")
        path = headers.get(b":path", b"/").decode("utf-8", "replace")
        found = resolve(self._root, path) if method in (b"GET", b"HEAD") else None
        if found is None:
            log(f"{method.decode(errors='replace')} {path}: 404")
            self._http.send_headers(stream_id, [(b":status", b"404")], end_stream=True)
            return
        data = found.read_bytes()
        self._http.send_headers(
            stream_id, [(b":status", b"200"), (b"content-length", str(len(data)).encode())]
        )
        self._http.send_data(stream_id, data if method == b"GET" else b"", end_stream=True)

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self._http = H3Connection(self._quic)
        elif isinstance(event, HandshakeCompleted):
            log(f"handshake completed alpn={event.alpn_protocol}")
            log_version(self._quic)
        if self._http is None:
            return
        for ev in self._http.handle_event(event):
            if isinstance(ev, HeadersReceived):
                self._answer(ev.stream_id, dict(ev.headers))
        self.transmit()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_args(parser)
    add_common_args(parser)
    args = parser.parse_args()

    config, _secrets = base_configuration(args, is_client=False)
    config.alpn_protocols = H3_ALPN
    config.load_cert_chain(args.cert, args.key)
    server = await serve(
        args.host,
        args.port,
        configuration=config,
        create_protocol=partial(H3ServerProtocol, root=Path(args.root).resolve()),
    )
    return await announce_and_serve(server)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
