"""Two network namespaces joined by N veth pairs, for benchmarks over real kernel paths.

Pair k (1-based) joins the server namespace's 10.77.k.1/24 to the client namespace's
10.77.k.2/24. The namespaces (and whatever still runs in them) are removed by `close()`, on
leaving a `with` block, at interpreter exit, and on SIGTERM/SIGINT.

Needs root (CAP_NET_ADMIN) and `ip`.
"""

import atexit
import os
import signal
import subprocess


class VethPaths:
    def __init__(self, n, tag=None):
        if os.geteuid() != 0:
            raise SystemExit("network namespaces need root: run the benchmark as root (or without --netns)")
        tag = tag or str(os.getpid())
        self.n = n
        self.server_ns, self.client_ns = f"mpqb-{tag}-srv", f"mpqb-{tag}-cli"
        self.closed = False
        atexit.register(self.close)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        try:
            self._create()
        except subprocess.CalledProcessError as e:
            self.close()
            raise SystemExit(f"cannot set up the namespaces: {' '.join(e.cmd)} failed: {e.stderr.strip()}")

    def _on_signal(self, signum, _frame):
        self.close()
        raise SystemExit(128 + signum)

    @staticmethod
    def _ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

    def _create(self):
        for ns in (self.server_ns, self.client_ns):
            self._ip("netns", "add", ns)
            self._ip("-n", ns, "link", "set", "lo", "up")
        for k in range(1, self.n + 1):
            s, c = f"vs{k}", f"vc{k}"
            self._ip("link", "add", s, "netns", self.server_ns, "type", "veth", "peer", "name", c, "netns",
                     self.client_ns)
            self._ip("-n", self.server_ns, "addr", "add", f"10.77.{k}.1/24", "dev", s)
            self._ip("-n", self.client_ns, "addr", "add", f"10.77.{k}.2/24", "dev", c)
            self._ip("-n", self.server_ns, "link", "set", s, "up")
            self._ip("-n", self.client_ns, "link", "set", c, "up")

    def server_addr(self, k):
        """The server's address on pair k (1-based)."""
        return f"10.77.{k}.1"

    def client_addr(self, k):
        """The client's address on pair k (1-based)."""
        return f"10.77.{k}.2"

    def in_server(self, cmd):
        return ["ip", "netns", "exec", self.server_ns, *cmd]

    def in_client(self, cmd):
        return ["ip", "netns", "exec", self.client_ns, *cmd]

    def close(self):
        if self.closed:
            return
        self.closed = True
        for ns in (self.server_ns, self.client_ns):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()
