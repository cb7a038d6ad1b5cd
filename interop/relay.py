"""A small UDP relay that impairs traffic, for the interop runner's network cases without its
simulator (issue F item 8: "impairments come from the lab's link element or a small UDP relay
until it exists").

The client talks to the relay, the relay to the server. Each client address gets its own
upstream socket, so the server sees the relay's address as the client's. Per datagram, in both
directions, with a seeded generator (the same seed, the same drops):

* ``--loss P``: drop with probability P (the runner's transferloss and handshakeloss);
* ``--corrupt P``: flip one byte of the UDP payload with probability P (transfercorruption,
  handshakecorruption), the datagram still delivered;
* ``--blackhole START:END``: drop everything between START and END seconds after the first
  datagram (blackhole);
* ``--blackhole-from HOST:START``: from START seconds after the first datagram on, drop every
  datagram to and from the clients at address HOST, for good (a multipath client's second
  path dies silently: mp_path_dies);
* ``--rebind-port-every S``: every S seconds the client's upstream socket is replaced by one on
  a new port: a NAT that rebinds the client's port (rebind-port);
* ``--rebind-addr-after S``: after S seconds the upstream socket moves to another loopback
  address (``--rebind-addr``, default 127.0.0.2) and a new port: a NAT that changes the
  client's address (rebind-addr);
* ``--delay S``: deliver every datagram S seconds late, in each direction (longrtt: the
  runner's 1.5 s round trip is ``--delay 0.75``);
* ``--amplification-window S``: deliver the client's datagrams until the server sends one of
  at least 1000 bytes (its handshake flight begins: the client's whole ClientHello got through,
  in one datagram or more), then none of the client's for S seconds, and count the bytes each
  side sent until then (amplificationlimit: the server
  must not send more than three times what it received from an address it has not validated,
  RFC 9000 §8.1; the counters ``amp_client_bytes`` and ``amp_server_bytes`` let a test check
  it whatever the server's implementation).

It prints ``relay listening on HOST:PORT`` once ready and, on SIGTERM, a JSON line with what it
did (datagrams forwarded, dropped, corrupted, rebinds), so a test can check the impairment
really happened.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import sys
import time


class Stats:
    def __init__(self) -> None:
        self.forwarded = 0
        self.dropped = 0
        self.corrupted = 0
        self.rebinds = 0
        self.delayed = 0
        # --amplification-window: bytes of the datagrams each side sent before its end (the
        # client's: only the first one is delivered).
        self.amp_client_bytes = 0
        self.amp_server_bytes = 0

    def as_dict(self) -> dict[str, int]:
        return dict(
            forwarded=self.forwarded,
            dropped=self.dropped,
            corrupted=self.corrupted,
            rebinds=self.rebinds,
            delayed=self.delayed,
            amp_client_bytes=self.amp_client_bytes,
            amp_server_bytes=self.amp_server_bytes,
        )


class Impairment:
    """What happens to one datagram."""

    def __init__(self, args: argparse.Namespace, stats: Stats) -> None:
        self.rng = random.Random(args.seed)
        self.loss = args.loss
        self.corrupt = args.corrupt
        self.blackhole = args.blackhole
        self.blackhole_from = args.blackhole_from
        self.amp_window = args.amplification_window
        self.stats = stats
        self.start: float | None = None
        # --amplification-window: when the server's flight began (the client's datagrams are
        # dropped from then on, for the window).
        self.amp_closed_at: float | None = None

    def elapsed(self) -> float:
        now = time.monotonic()
        if self.start is None:
            self.start = now
        return now - self.start

    def apply(self, data: bytes, to_server: bool, client: tuple) -> bytes | None:
        t = self.elapsed()
        if self.blackhole_from and client[0] == self.blackhole_from[0] and t >= self.blackhole_from[1]:
            self.stats.dropped += 1
            return None
        closed = self.amp_closed_at
        if self.amp_window and (closed is None or t < closed + self.amp_window):
            if not to_server:
                self.stats.amp_server_bytes += len(data)
                if closed is None and len(data) >= 1000:
                    self.amp_closed_at = t
            elif closed is None:
                self.stats.amp_client_bytes += len(data)
            else:
                self.stats.dropped += 1
                return None
        if self.blackhole and self.blackhole[0] <= t < self.blackhole[1]:
            self.stats.dropped += 1
            return None
        if self.loss and self.rng.random() < self.loss:
            self.stats.dropped += 1
            return None
        if self.corrupt and data and self.rng.random() < self.corrupt:
            i = self.rng.randrange(len(data))
            data = data[:i] + bytes([data[i] ^ (1 + self.rng.randrange(255))]) + data[i + 1 :]
            self.stats.corrupted += 1
        self.stats.forwarded += 1
        return data


class Upstream(asyncio.DatagramProtocol):
    """The relay's socket towards the server for one client."""

    def __init__(self, relay: Relay, client: tuple) -> None:
        self.relay = relay
        self.client = client
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        out = self.relay.impair.apply(data, to_server=False, client=self.client)
        if out is not None and self.relay.downstream is not None:
            self.relay.later(self.relay.downstream.sendto, out, self.client)


class Relay(asyncio.DatagramProtocol):
    """The relay's socket facing the clients."""

    def __init__(self, args: argparse.Namespace, stats: Stats) -> None:
        self.args = args
        self.server = (args.server_host, args.server_port)
        self.impair = Impairment(args, stats)
        self.stats = stats
        self.downstream: asyncio.DatagramTransport | None = None
        # client address -> (upstream, when it was bound, rebound to the other address yet)
        self.upstreams: dict[tuple, tuple[Upstream, float, bool]] = {}
        # Datagrams are forwarded in arrival order, also while an upstream socket is made.
        self.order = asyncio.Lock()

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.downstream = transport

    def later(self, send, data: bytes, to: tuple) -> None:
        """Sends now, or --delay seconds from now (datagrams keep their order: one delay)."""
        if self.args.delay <= 0:
            send(data, to)
            return
        self.stats.delayed += 1
        asyncio.get_running_loop().call_later(self.args.delay, send, data, to)

    def datagram_received(self, data: bytes, addr) -> None:
        asyncio.get_running_loop().create_task(self.forward(data, addr))

    async def upstream_for(self, client: tuple) -> Upstream:
        now = time.monotonic()
        entry = self.upstreams.get(client)
        rebind_host = None
        if entry is not None:
            up, since, moved = entry
            t = self.impair.elapsed()
            if self.args.rebind_port_every and now - since >= self.args.rebind_port_every:
                rebind_host = "127.0.0.1" if not moved else self.args.rebind_addr
            elif self.args.rebind_addr_after and not moved and t >= self.args.rebind_addr_after:
                rebind_host = self.args.rebind_addr
            if rebind_host is None:
                return up
            assert up.transport is not None
            up.transport.close()
            self.stats.rebinds += 1
        loop = asyncio.get_running_loop()
        host = rebind_host or "127.0.0.1"
        _, up = await loop.create_datagram_endpoint(lambda: Upstream(self, client), local_addr=(host, 0))
        moved = host != "127.0.0.1" or (entry is not None and entry[2])
        self.upstreams[client] = (up, now, moved)
        return up

    async def forward(self, data: bytes, client: tuple) -> None:
        async with self.order:
            out = self.impair.apply(data, to_server=True, client=client)
            if out is None:
                return
            up = await self.upstream_for(client)
            if up.transport is not None:
                self.later(up.transport.sendto, out, self.server)


def parse_host_time(text: str) -> tuple[str, float]:
    host, _, start = text.rpartition(":")
    return host, float(start)


def parse_window(text: str) -> tuple[float, float]:
    start, _, end = text.partition(":")
    return float(start), float(end)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT the clients send to (port 0: any)")
    p.add_argument("--server", required=True, help="HOST:PORT of the server")
    p.add_argument("--loss", type=float, default=0.0, help="probability of dropping a datagram (each direction)")
    p.add_argument("--corrupt", type=float, default=0.0, help="probability of flipping a byte of a datagram")
    p.add_argument("--blackhole", type=parse_window, default=None, help="START:END seconds with nothing delivered")
    p.add_argument(
        "--blackhole-from", type=parse_host_time, default=None, help="HOST:START: the clients at HOST cut off from START seconds on"
    )
    p.add_argument("--rebind-port-every", type=float, default=0.0, help="seconds between port rebindings")
    p.add_argument("--rebind-addr-after", type=float, default=0.0, help="seconds before the address changes")
    p.add_argument("--rebind-addr", default="127.0.0.2", help="the address the client moves to")
    p.add_argument("--delay", type=float, default=0.0, help="seconds every datagram is held, each direction")
    p.add_argument(
        "--amplification-window", type=float, default=0.0,
        help="seconds, from the server's first datagram of 1000 bytes or more, without the client's datagrams",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the loss and corruption draws")
    args = p.parse_args()
    host, _, port = args.listen.rpartition(":")
    args.server_host, _, server_port = args.server.rpartition(":")
    args.server_port = int(server_port)
    stats = Stats()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(lambda: Relay(args, stats), local_addr=(host, int(port)))
    sockname = transport.get_extra_info("sockname")
    print(f"relay listening on {sockname[0]}:{sockname[1]}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    print(json.dumps(stats.as_dict()), flush=True)
    transport.close()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
