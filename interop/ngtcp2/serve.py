#!/usr/bin/env python3
"""Runs ngtcp2's HTTP/3 example server (Debian's ngtcp2-server: gtlsserver) the way the
interop harness expects a server: "listening on HOST:PORT" on stdout once its UDP socket
is bound (gtlsserver prints nothing of the kind), stopped by SIGTERM.

Usage: serve.py HOST PORT KEY CERT ROOT [gtlsserver options...]
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time


def udp_bound(port: int) -> bool:
    """Whether a UDP socket is bound to `port` (IPv4 or IPv6), from /proc/net/udp*."""
    want = f":{port:04X}"
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                next(f)
                if any(line.split()[1].endswith(want) for line in f):
                    return True
        except OSError:
            continue
    return False


def main() -> int:
    if len(sys.argv) < 6:
        print(__doc__, file=sys.stderr)
        return 2
    host, port, key, cert, root, *extra = sys.argv[1:]
    server = shutil.which("gtlsserver") or shutil.which("gtlsserver", path="/usr/sbin:/usr/bin")
    if server is None:
        print("gtlsserver not found: install Debian's ngtcp2-server", file=sys.stderr)
        return 2
    child = subprocess.Popen([server, "-d", root, "--quiet", *extra, host, port, key, cert])
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    deadline = time.monotonic() + 10
    while not udp_bound(int(port)):
        if child.poll() is not None:
            return child.returncode or 1
        if time.monotonic() > deadline:
            print(f"gtlsserver did not bind UDP port {port} within 10 s", file=sys.stderr)
            child.kill()
            return 1
        time.sleep(0.02)
    print(f"listening on {host}:{port}", flush=True)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
