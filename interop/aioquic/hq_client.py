#!/usr/bin/env python3
"""HTTP/0.9 (ALPN hq-interop) client on aioquic.

Downloads every URL (https://HOST:PORT/name, all on the same connection, requested
concurrently) into OUTPUT/name. Exit status 0 only if every download completed with
FIN; 1 on any error or on --timeout.

--resume fetches the first URL in a first connection and the others in a second one that
resumes its TLS session with the ticket the server sent; --0rtt does the same and sends
the second connection's requests in 0-RTT (early data) before its handshake completes.
The handshake line reports resumed=... early_data_accepted=...

--key-update N makes the client call QuicConnection.request_key_update() each time
another N bytes of response data have arrived, so the server has to follow a key
update mid-transfer. Key updates (local or answered) are reported on stderr as
"key_update trigger=local_update|remote_update key_phase=P", and a summary line
"key updates: local=L remote=R" is printed at the end.
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
from aioquic.quic.events import (  # noqa: E402
    ConnectionTerminated,
    HandshakeCompleted,
    QuicEvent,
    StreamDataReceived,
    StreamReset,
)

from common import (  # noqa: E402
    KEY_UPDATES,
    add_client_args,
    add_common_args,
    base_configuration,
    install_key_update_probe,
    log,
    log_version,
)


class Download:
    def __init__(self, path: str, dest: Path, loop: asyncio.AbstractEventLoop) -> None:
        self.path = path
        self.dest = dest
        self.file = open(dest, "wb")
        self.received = 0
        self.done: asyncio.Future[None] = loop.create_future()

    def fail(self, exc: Exception) -> None:
        self.file.close()
        if not self.done.done():
            self.done.set_exception(exc)


class HqClientProtocol(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._downloads: dict[int, Download] = {}
        self.key_update_every = 0
        self._received_total = 0
        self._next_key_update = 0

    def get(self, path: str, dest: Path) -> Download:
        stream_id = self._quic.get_next_available_stream_id()
        dl = Download(path, dest, self._loop)
        self._downloads[stream_id] = dl
        self._quic.send_stream_data(stream_id, f"GET {path}\r\n".encode("ascii"), end_stream=True)
        self.transmit()
        return dl

    def _maybe_key_update(self, nbytes: int) -> None:
        if not self.key_update_every:
            return
        self._received_total += nbytes
        if self._next_key_update == 0:
            self._next_key_update = self.key_update_every
        if self._received_total >= self._next_key_update:
            self._next_key_update += self.key_update_every
            log(f"requesting key update after {self._received_total} bytes")
            self._quic.request_key_update()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            log(
                f"handshake completed alpn={event.alpn_protocol} resumed={event.session_resumed} "
                f"early_data_accepted={event.early_data_accepted}"
            )
            log_version(self._quic)
        elif isinstance(event, StreamDataReceived):
            dl = self._downloads.get(event.stream_id)
            if dl is None:
                return
            dl.file.write(event.data)
            dl.received += len(event.data)
            self._maybe_key_update(len(event.data))
            if event.end_stream:
                dl.file.close()
                if not dl.done.done():
                    dl.done.set_result(None)
        elif isinstance(event, StreamReset):
            dl = self._downloads.get(event.stream_id)
            if dl is not None:
                dl.fail(RuntimeError(f"{dl.path}: stream reset by server, error code {event.error_code:#x}"))
        elif isinstance(event, ConnectionTerminated):
            msg = (
                f"connection terminated error_code={event.error_code:#x} "
                f"frame_type={event.frame_type} reason={event.reason_phrase!r}"
            )
            log(msg)
            for dl in self._downloads.values():
                dl.fail(RuntimeError(msg))


async def run(args: argparse.Namespace) -> int:
    urls = [urlparse(u) for u in args.urls]
    for u in urls:
        if u.scheme != "https" or not u.hostname:
            log(f"unsupported URL: {u.geturl()}")
            return 2
    authorities = {(u.hostname, u.port or 443) for u in urls}
    if len(authorities) != 1:
        log("all URLs must share one host:port")
        return 2
    host, port = authorities.pop()

    config, _secrets = base_configuration(args, is_client=True)
    if args.insecure:
        config.verify_mode = ssl.CERT_NONE
    elif args.ca:
        config.load_verify_locations(cafile=args.ca)
    if args.server_name:
        config.server_name = args.server_name

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    resume = args.resume or args.zero_rtt
    if resume and len(urls) < 2:
        log("--resume / --0rtt need two URLs or more")
        return 2
    batches = [urls[:1], urls[1:]] if resume else [urls]
    tickets: list = []
    for i, batch in enumerate(batches):
        if i > 0:
            if not tickets:
                log("no session ticket received from the first connection")
                return 1
            config.session_ticket = tickets[-1]
        # The second connection sends its requests at once: in 0-RTT with --0rtt.
        early = i > 0 and args.zero_rtt
        await fetch(host, port, config, batch, out, args, tickets.append, wait_connected=not early)
    return 0


async def fetch(host, port, config, urls, out: Path, args, ticket_handler, wait_connected: bool) -> None:
    start = time.monotonic()
    async with connect(
        host,
        port,
        configuration=config,
        create_protocol=HqClientProtocol,
        session_ticket_handler=ticket_handler,
        wait_connected=wait_connected,
    ) as proto:
        assert isinstance(proto, HqClientProtocol)
        proto.key_update_every = args.key_update
        downloads = []
        for u in urls:
            path = u.path or "/"
            name = os.path.basename(path.rstrip("/")) or "index.html"
            downloads.append(proto.get(path, out / name))
        await asyncio.gather(*(d.done for d in downloads))
        elapsed = time.monotonic() - start
        total = sum(d.received for d in downloads)
        log(f"downloaded {len(downloads)} file(s), {total} bytes in {elapsed:.2f}s")
        proto.close()
        await proto.wait_closed()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_client_args(parser)
    parser.add_argument("--server-name", help="SNI / name to verify (default: URL host)")
    parser.add_argument(
        "--key-update",
        type=int,
        default=0,
        metavar="BYTES",
        help="initiate a key update every BYTES bytes of received data (0: never)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="overall deadline in seconds")
    parser.add_argument("--resume", action="store_true", help="fetch the rest of the URLs in a resumed connection")
    parser.add_argument(
        "--0rtt", dest="zero_rtt", action="store_true", help="like --resume, with the requests in 0-RTT"
    )
    add_common_args(parser)
    args = parser.parse_args()

    install_key_update_probe()
    try:
        rc = asyncio.run(asyncio.wait_for(run(args), timeout=args.timeout))
    except asyncio.TimeoutError:
        log(f"timed out after {args.timeout}s")
        rc = 1
    except Exception as exc:  # noqa: BLE001 - any failure is a non-zero exit
        log(f"error: {type(exc).__name__}: {exc}")
        rc = 1
    log(f"key updates: local={KEY_UPDATES['local_update']} remote={KEY_UPDATES['remote_update']}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
