"""The `resumption` and `zerortt` interop cases' client flags and checks (see README.md).

The client fetches the first file in a first connection and the others in a second one
that resumes its TLS session; with "zerortt" the second connection's requests go in 0-RTT
(RFC 9001 §4.6). Both sides must say so in their logs, and an mpq side's qlog must hold
the 0-RTT packets themselves.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

# Per implementation, the client's flags of each `Case.resume` mode (mpq at -v logs each
# handshake's outcome; its qlog shows the 0-RTT packets).
RESUME_ARGS = {
    ("aioquic", "resumption"): ["--resume"],
    ("aioquic", "zerortt"): ["--0rtt"],
    ("quicgo", "resumption"): ["-resume"],
    ("quicgo", "zerortt"): ["-0rtt"],
    ("quinn", "resumption"): ["--resume"],
    ("quinn", "zerortt"): ["--0rtt"],
    ("mpq", "resumption"): ["--resume", "-v"],
    ("mpq", "zerortt"): ["--0rtt", "-v"],
}
# What each client's log says of a resumed handshake, and of accepted 0-RTT.
RESUMED_RE = {
    "aioquic": re.compile(r"resumed=True"),
    "quicgo": re.compile(r"resumed=true"),
    "quinn": re.compile(r"resumed=true"),
    "mpq": re.compile(r"handshake complete: .*resumed session"),
}
EARLY_ACCEPTED_RE = {
    "aioquic": re.compile(r"early_data_accepted=True"),
    "quicgo": re.compile(r"used_0rtt=true"),
    "quinn": re.compile(r"used_0rtt=true"),
    "mpq": re.compile(r"handshake complete: .*0-RTT accepted"),
}

SERVER_RESUMED_RE = {
    "aioquic": re.compile(r"resumed=True"),
    "quicgo": re.compile(r"resumed=true"),
    # quinn reports no resumption on the server side; quinn-peer's session store says when
    # a client's ticket was found.
    "quinn": re.compile(r"tls session resumed=true"),
    "mpq": re.compile(r"server handshake complete: .*resumed session"),
}
SERVER_EARLY_RE = {
    "aioquic": [re.compile(r"early_data_accepted=True"), re.compile(r"request data in 0-RTT")],
    "quicgo": [re.compile(r"used_0rtt=true")],
    # quinn reports no 0-RTT acceptance on the server side: quinn-peer logs a request
    # stream that arrived before the handshake completed.
    "quinn": [re.compile(r"request data in 0-RTT")],
    "mpq": [re.compile(r"server handshake complete: .*0-RTT accepted")],
}


def qlog_has_0rtt(qlog_dir: Path, event: str) -> bool:
    """An mpq qlog file in qlog_dir records a 0-RTT packet `event` (packet_sent/_received)."""
    for f in qlog_dir.glob("*") if qlog_dir.is_dir() else []:
        for line in f.read_text(errors="replace").splitlines():
            if event in line and '"packet_type":"0RTT"' in line.replace(" ", ""):
                return True
    return False


def check_resumption(mode: str, client: str, server: str, client_log: str, srv, logdir: Path, context: str) -> None:
    """The second connection resumed the first one's session, on both sides; with
    "zerortt", its requests went in 0-RTT packets and the server accepted them."""
    assert RESUMED_RE[client].search(client_log), f"{client} client did not resume{context}"
    # The server logs a handshake once it completed: give it a moment after the client.
    srv.wait_stderr(SERVER_RESUMED_RE[server], 5.0, "a resumed handshake")
    if mode != "zerortt":
        return
    assert EARLY_ACCEPTED_RE[client].search(client_log), f"{client} client: 0-RTT not accepted{context}"
    for pattern in SERVER_EARLY_RE[server]:
        srv.wait_stderr(pattern, 5.0, f"0-RTT accepted ({pattern.pattern})")
    # mpq's qlog shows the 0-RTT packets themselves (type "0RTT").
    if client == "mpq":
        assert qlog_has_0rtt(logdir / "client-qlog", "packet_sent"), f"mpq client qlog: no 0-RTT packet sent{context}"
    if server == "mpq":
        # The server writes its qlog as it goes; the connection may still be draining.
        deadline = time.monotonic() + 5.0
        while not qlog_has_0rtt(logdir / "server-qlog", "packet_received") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert qlog_has_0rtt(logdir / "server-qlog", "packet_received"), f"mpq server qlog: no 0-RTT packet received{context}"
