"""DATAGRAM (RFC 9221) peer on aioquic, speaking mpq perf's datagram protocol (ALPN "perf").

server: advertises max_datagram_frame_size, counts every datagram a client sends and echoes
        it back (send_datagram_frame); a bidirectional stream carrying the 8-byte request
        2^64-2 (mpq perf's DATAGRAM_REPORT) is answered with 16 bytes: the count and the
        payload bytes received on that connection, big-endian, then FIN. Issues session
        tickets that allow 0-RTT (each used once) and logs, per report, how many datagrams
        arrived before its handshake completed ("early N": in 0-RTT packets). Prints
        "listening on HOST:PORT" once bound; serves until killed.
client: sends --count datagrams of --size bytes, waits --grace seconds, asks for the
        report, and prints one JSON line: {"sent", "received_by_server", "echoed"}. Exit 0
        when the server received at least one datagram. With --0rtt, a first connection
        takes the server's session ticket, and the measured one resumes and queues its
        datagrams before its handshake completes, so they leave in 0-RTT packets (RFC 9221
        §3); the JSON line adds "early_data_accepted".
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
        self.early = 0
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
            # Before the handshake completed: it came in a 0-RTT packet.
            if not self._quic._handshake_complete:
                self.early += 1
            self._quic.send_datagram_frame(event.data)
            self.transmit()
        elif isinstance(event, StreamDataReceived):
            buf = self.requests.setdefault(event.stream_id, bytearray())
            buf += event.data
            if len(buf) >= 8:
                (req,) = struct.unpack(">Q", bytes(buf[:8]))
                del self.requests[event.stream_id]
                if req == DATAGRAM_REPORT:
                    log(f"report: {self.count} datagrams, {self.bytes} bytes, early {self.early}")
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
        self.early_data_accepted: bool | None = None

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            self.early_data_accepted = event.early_data_accepted
            log(f"handshake completed resumed={event.session_resumed} early_data_accepted={event.early_data_accepted}")
        elif isinstance(event, DatagramFrameReceived):
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
    tickets: dict[bytes, object] = {}
    server = await serve(
        args.host,
        args.port,
        configuration=config,
        create_protocol=DgramServer,
        # Single-use tickets: a ticket (and its 0-RTT) cannot be replayed (RFC 8446 §8.1).
        session_ticket_fetcher=lambda label: tickets.pop(label, None),
        session_ticket_handler=lambda t: tickets.__setitem__(t.ticket, t),
    )
    return await announce_and_serve(server)


async def run_client(args: argparse.Namespace) -> int:
    config = QuicConfiguration(is_client=True, alpn_protocols=[ALPN], max_datagram_frame_size=MAX_DATAGRAM_FRAME_SIZE)
    if args.ca:
        config.load_verify_locations(args.ca)
    else:
        config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    if args.zero_rtt:
        tickets: list = []
        async with connect(args.host, args.port, configuration=config, create_protocol=DgramClient,
                           session_ticket_handler=tickets.append) as first:
            # The ticket comes after the handshake: a ping's round trip gives it time.
            await first.ping()
            for _ in range(50):
                if tickets:
                    break
                await asyncio.sleep(0.01)
        if not tickets:
            log("no session ticket received from the first connection")
            return 1
        config.session_ticket = tickets[-1]
    # With a ticket, the handshake is not awaited: the datagrams go in 0-RTT.
    async with connect(args.host, args.port, configuration=config, create_protocol=DgramClient,
                       wait_connected=not args.zero_rtt) as proto:
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
        out = {"sent": args.count, "received_by_server": received, "echoed": client.echoed}
        if args.zero_rtt:
            out["early_data_accepted"] = client.early_data_accepted
        print(json.dumps(out), flush=True)
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
    parser.add_argument("--0rtt", dest="zero_rtt", action="store_true",
                        help="client: resume a first connection's session and send the datagrams in 0-RTT")
    args = parser.parse_args()
    if args.role == "server":
        return asyncio.run(run_server(args))
    return asyncio.run(run_client(args))


if __name__ == "__main__":
    sys.exit(main())
