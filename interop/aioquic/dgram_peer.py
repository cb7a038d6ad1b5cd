"""DATAGRAM (RFC 9221) peer on aioquic, speaking mpq perf's datagram protocol (ALPN "perf").

server: advertises max_datagram_frame_size, counts every datagram a client sends and echoes
        it back (send_datagram_frame); a bidirectional stream carrying the 8-byte request
        2^64-2 (mpq perf's DATAGRAM_REPORT) is answered with 16 bytes: the count and the
        payload bytes received on that connection, big-endian, then FIN. Prints
        "listening on HOST:PORT" once bound; serves until killed.
client: sends --count datagrams of --size bytes, waits --grace seconds, asks for the
        report, and prints one JSON line: {"sent", "received_by_server", "echoed"}. Exit 0
        when the server received at least one datagram.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import struct
import sys
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aioquic.asyncio import QuicConnectionProtocol, connect, serve  # noqa: E402
from aioquic.quic.configuration import QuicConfiguration  # noqa: E402
from aioquic.quic.events import (  # noqa: E402
    ConnectionTerminated,
    DatagramFrameReceived,
    HandshakeCompleted,
    QuicEvent,
    StreamDataReceived,
)

from common import announce_and_serve, log  # noqa: E402

ALPN = "perf"
DATAGRAM_REPORT = (1 << 64) - 2
MAX_DATAGRAM_FRAME_SIZE = 65536


class DgramServer(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.count = 0
        self.bytes = 0
        self.requests: dict[int, bytearray] = {}

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            log(f"handshake completed alpn={event.alpn_protocol}")
        elif isinstance(event, ConnectionTerminated):
            log(f"connection terminated error_code={event.error_code:#x} reason={event.reason_phrase!r} "
                f"datagrams={self.count}")
        elif isinstance(event, DatagramFrameReceived):
            self.count += 1
            self.bytes += len(event.data)
            self._quic.send_datagram_frame(event.data)
            self.transmit()
        elif isinstance(event, StreamDataReceived):
            buf = self.requests.setdefault(event.stream_id, bytearray())
            buf += event.data
            if len(buf) >= 8:
                (req,) = struct.unpack(">Q", bytes(buf[:8]))
                del self.requests[event.stream_id]
                if req == DATAGRAM_REPORT:
                    log(f"report: {self.count} datagrams, {self.bytes} bytes")
                    self._quic.send_stream_data(event.stream_id, struct.pack(">QQ", self.count, self.bytes), end_stream=True)
                else:
                    self._quic.reset_stream(event.stream_id, 0x10)
                self.transmit()


class DgramClient(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.echoed = 0
        self.answer = bytearray()
        self.answered = asyncio.Event()

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, DatagramFrameReceived):
            self.echoed += 1
        elif isinstance(event, StreamDataReceived):
            self.answer += event.data
            if event.end_stream or len(self.answer) >= 16:
                self.answered.set()
        elif isinstance(event, ConnectionTerminated):
            self.answered.set()


async def run_server(args: argparse.Namespace) -> int:
    config = QuicConfiguration(is_client=False, alpn_protocols=[ALPN], max_datagram_frame_size=MAX_DATAGRAM_FRAME_SIZE)
    config.load_cert_chain(args.cert, args.key)
    server = await serve(args.host, args.port, configuration=config, create_protocol=DgramServer)
    return await announce_and_serve(server)


async def run_client(args: argparse.Namespace) -> int:
    config = QuicConfiguration(is_client=True, alpn_protocols=[ALPN], max_datagram_frame_size=MAX_DATAGRAM_FRAME_SIZE)
    if args.ca:
        config.load_verify_locations(args.ca)
    else:
        config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    async with connect(args.host, args.port, configuration=config, create_protocol=DgramClient) as proto:
        client: DgramClient = proto  # type: ignore[assignment]
        payload = bytes(args.size)
        for i in range(args.count):
            client._quic.send_datagram_frame(payload)
            client.transmit()
            if i % 10 == 9:
                # Let the congestion controller and the peer keep up.
                await asyncio.sleep(0.002)
        await asyncio.sleep(args.grace)
        sid = client._quic.get_next_available_stream_id()
        client._quic.send_stream_data(sid, struct.pack(">Q", DATAGRAM_REPORT), end_stream=True)
        client.transmit()
        await asyncio.wait_for(client.answered.wait(), timeout=10)
        if len(client.answer) < 16:
            log(f"no report: {bytes(client.answer)!r}")
            return 1
        received, _ = struct.unpack(">QQ", bytes(client.answer[:16]))
        print(json.dumps({"sent": args.count, "received_by_server": received, "echoed": client.echoed}), flush=True)
        return 0 if received > 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=["server", "client"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4433)
    parser.add_argument("--cert", help="server: PEM certificate chain")
    parser.add_argument("--key", help="server: PEM private key")
    parser.add_argument("--ca", help="client: CA to verify the server (default: no verification)")
    parser.add_argument("--count", type=int, default=200, help="client: datagrams to send")
    parser.add_argument("--size", type=int, default=500, help="client: payload bytes per datagram")
    parser.add_argument("--grace", type=float, default=0.5, help="client: seconds to wait before the report")
    args = parser.parse_args()
    if args.role == "server":
        return asyncio.run(run_server(args))
    return asyncio.run(run_client(args))


if __name__ == "__main__":
    sys.exit(main())
