#!/usr/bin/env python3
"""HTTP/3 (RFC 9114, ALPN h3) client on aioquic's H3Connection.

GETs every URL (https://HOST:PORT/name, all on one connection, concurrently) into
OUTPUT/name. Exit status 0 only if every response was 200 and ended; 1 on any error or on
--timeout. The handshake is reported on stderr ("handshake completed alpn=h3").
"""
from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aioquic.asyncio import QuicConnectionProtocol, connect  # noqa: E402
from aioquic.h3.connection import H3_ALPN, H3Connection  # noqa: E402
from aioquic.h3.events import DataReceived, HeadersReceived  # noqa: E402
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, QuicEvent, StreamReset  # noqa: E402

from common import add_client_args, add_common_args, base_configuration, log, log_version  # noqa: E402
from hq_client import Download  # noqa: E402


class H3ClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        self._downloads: dict[int, Download] = {}

    def get(self, authority: str, path: str, dest: Path) -> Download:
        stream_id = self._quic.get_next_available_stream_id()
        dl = Download(path, dest, self._loop)
        self._downloads[stream_id] = dl
        self._http.send_headers(
            stream_id,
            [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", path.encode()),
                (b"user-agent", b"aioquic-interop"),
            ],
            end_stream=True,
        )
        self.transmit()
        return dl

    def _finish(self, dl: Download) -> None:
        dl.file.close()
        if not dl.done.done():
            dl.done.set_result(None)

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            log(f"handshake completed alpn={event.alpn_protocol}")
            log_version(self._quic)
        elif isinstance(event, StreamReset) and event.stream_id in self._downloads:
            dl = self._downloads[event.stream_id]
            dl.fail(RuntimeError(f"{dl.path}: stream reset by server, error code {event.error_code:#x}"))
        elif isinstance(event, ConnectionTerminated):
            msg = f"connection terminated error_code={event.error_code:#x} reason={event.reason_phrase!r}"
            log(msg)
            for dl in self._downloads.values():
                dl.fail(RuntimeError(msg))
        for ev in self._http.handle_event(event):
            dl = self._downloads.get(getattr(ev, "stream_id", -1))
            if dl is None:
                continue
            if isinstance(ev, HeadersReceived):
                status = dict(ev.headers).get(b":status", b"")
                if status != b"200":
                    dl.fail(RuntimeError(f"{dl.path}: status {status.decode(errors='replace')}"))
            elif isinstance(ev, DataReceived):
                if not dl.done.done():
                    dl.file.write(ev.data)
                    dl.received += len(ev.data)
            if getattr(ev, "stream_ended", False):
                self._finish(dl)


async def run(args: argparse.Namespace) -> int:
    urls = [urlparse(u) for u in args.urls]
    authorities = {(u.hostname, u.port or 443) for u in urls}
    if any(u.scheme != "https" or not u.hostname for u in urls) or len(authorities) != 1:
        log("give https:// URLs of one host:port")
        return 2
    host, port = authorities.pop()
    config, _secrets = base_configuration(args, is_client=True)
    config.alpn_protocols = H3_ALPN
    if args.insecure:
        config.verify_mode = ssl.CERT_NONE
    elif args.ca:
        config.load_verify_locations(cafile=args.ca)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    async with connect(host, port, configuration=config, create_protocol=H3ClientProtocol) as proto:
        assert isinstance(proto, H3ClientProtocol)
        authority = f"{host}:{port}"
        downloads = []
        for u in urls:
            path = u.path or "/"
            downloads.append(proto.get(authority, path, out / (os.path.basename(path.rstrip("/")) or "index.html")))
        await asyncio.gather(*(d.done for d in downloads))
        total = sum(d.received for d in downloads)
        log(f"downloaded {len(downloads)} file(s), {total} bytes in {time.monotonic() - start:.2f}s")
        proto.close()
        await proto.wait_closed()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_client_args(parser)
    parser.add_argument("--timeout", type=float, default=60.0, help="overall deadline in seconds")
    add_common_args(parser)
    args = parser.parse_args()
    try:
        return asyncio.run(asyncio.wait_for(run(args), timeout=args.timeout))
    except asyncio.TimeoutError:
        log(f"timed out after {args.timeout}s")
    except Exception as exc:  # noqa: BLE001 - any failure is a non-zero exit
        log(f"error: {type(exc).__name__}: {exc}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
