"""mpq's client follows the operating system's change of its local address (issue F item 2,
RFC 9000 §9), mpq against mpq in two network namespaces (marker `mpq`; needs root and `ip`).
The certificate names 127.0.0.1, not 10.77.0.1: the client runs with --insecure.

A veth pair joins a client namespace (10.77.0.2/24) and a server namespace (10.77.0.1/24);
tbf on the server's side holds the download of 10 MiB to 30 Mbit/s so that it lasts about
3 s (the client checks its addresses every 250 ms). Once the client has written 2 MB of the
file, the test gives the client's interface 10.77.0.3 and
takes 10.77.0.2 away, as a DHCP renewal with a new lease would. The client, bound to the
wildcard address, must notice that the address its path sends from is gone, and move the
path to the one the routing table now picks: without multipath a migration (new connection
ID), with multipath a new path from 10.77.0.3 with the old one abandoned once it is
validated. Checked: the file byte for byte, the client's log line for the move, and the
server's for the new peer address. The same over HTTP/3 (`--http3` on both sides), whose
client runs on the application API. The namespaces are removed whatever happens.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from test_interop import (  # noqa: F401  (logdir, start_server, tls_files, www are fixtures)
    FILES,
    find_mpq,
    logdir,
    require,
    sha256,
    start_server,
    tail,
    tls_files,
    www,
)

pytestmark = pytest.mark.mpq

FILE = "10mb.bin"
# Enough of the file that the handshake is long confirmed when the address changes.
CHANGE_AFTER_BYTES = 2_000_000
TIMEOUT = 60.0
SERVER_IP, CLIENT_IP, NEW_CLIENT_IP = "10.77.0.1", "10.77.0.2", "10.77.0.3"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def namespaces():
    """(client namespace, server namespace, client interface), removed afterwards."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("needs root, ip and tc (network namespaces)")
    tag = f"{os.getpid() % 100000}"
    cns, sns, cif, sif = f"mpqac-c{tag}", f"mpqac-s{tag}", f"mac{tag}c", f"mac{tag}s"
    try:
        ip("netns", "add", cns)
        ip("netns", "add", sns)
        ip("link", "add", cif, "netns", cns, "type", "veth", "peer", "name", sif, "netns", sns)
        for ns, dev, addr in ((cns, cif, CLIENT_IP), (sns, sif, SERVER_IP)):
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        # Removing the primary address must keep the secondary one (the new lease).
        subprocess.run(
            ["ip", "netns", "exec", cns, "sysctl", "-qw", f"net.ipv4.conf.{cif}.promote_secondaries=1"], check=True
        )
        subprocess.run(
            ["tc", "-n", sns, "qdisc", "add", "dev", sif, "root", "tbf", "rate", "30mbit", "burst", "64kb", "latency", "50ms"],
            check=True,
        )
        yield cns, sns, cif
    finally:
        for ns in (cns, sns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.mark.parametrize(
    "mode,threads,http3",
    [
        ("migrate", "single", False),
        ("migrate", "per-path", False),
        ("multipath", "single", False),
        # mpq client --http3 runs on the application API (mpq-api), whose client connections
        # follow address changes the same way.
        ("migrate", "single", True),
        ("multipath", "per-path", True),
    ],
    ids=["no-multipath-single", "no-multipath-per-path", "multipath-single", "http3-no-multipath-single",
         "http3-multipath-per-path"],
)
def test_client_follows_a_local_address_change(mode, threads, http3, namespaces, tls_files, www, logdir, start_server,
                                               tmp_path):
    require("mpq", "client")
    require("mpq", "server")
    cns, sns, cif = namespaces
    root, digests = www
    out = tmp_path / "downloads"
    out.mkdir()
    mpq = str(find_mpq())
    env = dict(os.environ)
    env.pop("SSLKEYLOGFILE", None)
    srv = start_server(
        ["ip", "netns", "exec", sns, mpq, "server", "--listen", f"{SERVER_IP}:4433", "--root", str(root),
         "--cert", str(tls_files["cert"]), "--key", str(tls_files["key"]), "-v"] + (["--http3"] if http3 else []),
        env,
    )
    srv.wait_listening()
    cmd = ["ip", "netns", "exec", cns, mpq, "client", f"https://{SERVER_IP}:4433/{FILE}", "--output", str(out),
           "--insecure", "--threads", threads, "--timeout", str(int(TIMEOUT)), os.environ.get("ADDR_CHANGE_VERBOSITY", "-v")]
    if mode == "migrate":
        cmd.append("--no-multipath")
    if http3:
        cmd.append("--http3")
    log_path = logdir / "client.log"
    with open(log_path, "wb") as log:
        client = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        target = out / FILE
        deadline = time.monotonic() + TIMEOUT
        # Wait (polling the download, bounded) until the transfer is well under way.
        while not (target.exists() and target.stat().st_size >= CHANGE_AFTER_BYTES):
            assert client.poll() is None, f"client exited early\n{tail(log_path.read_text(errors='replace'))}"
            assert time.monotonic() < deadline, "the download never started"
            time.sleep(0.02)
        assert target.stat().st_size < FILES[FILE][0], "the download ended before the address changed"
        ip("-n", cns, "addr", "add", f"{NEW_CLIENT_IP}/24", "dev", cif)
        ip("-n", cns, "addr", "del", f"{CLIENT_IP}/24", "dev", cif)
        rc = client.wait(timeout=TIMEOUT)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    client_log = log_path.read_text(errors="replace")
    context = f"\n$ {' '.join(cmd)}\n--- client (tail) ---\n{tail(client_log)}\n{srv.describe()}"
    assert rc == 0, f"client exited with {rc}{context}"
    assert target.stat().st_size == FILES[FILE][0] and sha256(target) == digests[FILE], f"{FILE} differs{context}"
    if mode == "migrate":
        assert f"local address {CLIENT_IP} is gone: migrated to {NEW_CLIENT_IP}" in client_log, f"no migration{context}"
    else:
        assert re.search(rf"local address {CLIENT_IP} is gone: path \d+ opens from {NEW_CLIENT_IP}", client_log), (
            f"no replacement path{context}"
        )
        assert re.search(r"path \d+ abandoned: path \d+ replaces it", client_log), f"old path not abandoned{context}"
    srv.wait_stderr(re.compile(rf"(peer address changed.*to={NEW_CLIENT_IP}|path.*{NEW_CLIENT_IP})"), 5.0, "the new address")
