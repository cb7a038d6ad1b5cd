#!/usr/bin/env python3
"""Stand-in for the mpq binary, for checking the harness itself, NOT mpq.

It accepts the mpq command-line contract and hands the work to the peers:
  fake_mpq.py server ...  -> quicgo-peer server  (FAKE_MPQ_SERVER=aioquic for hq_server.py)
  fake_mpq.py client ...  -> aioquic hq_client.py (--key-update-every N packets becomes
                             --key-update N*1200 bytes)

    MPQ_BIN=interop/selftest/fake_mpq.py interop/run.sh -m mpq

exercises every mpq case's plumbing (command lines, readiness, key-update checks).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PY = str(HERE / ".venv/bin/python")


def main() -> None:
    parser = argparse.ArgumentParser(prog="mpq (fake)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("--listen", required=True)
    s.add_argument("--root", required=True)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--keylog")
    s.add_argument("--qlog-dir")
    c = sub.add_parser("client")
    c.add_argument("urls", nargs="+")
    c.add_argument("--output", required=True)
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--insecure", action="store_true")
    g.add_argument("--ca")
    c.add_argument("--key-update-every", type=int, default=0)
    a = parser.parse_args()

    if a.cmd == "server":
        host, port = a.listen.rsplit(":", 1)
        if os.environ.get("FAKE_MPQ_SERVER") == "aioquic":
            argv = [PY, str(HERE / "aioquic/hq_server.py"), "--host", host, "--port", port,
                    "--root", a.root, "--cert", a.cert, "--key", a.key]
            if a.keylog:
                argv += ["--secrets-log", a.keylog]
        else:
            argv = [str(HERE / "go/bin/quicgo-peer"), "server", "-listen", a.listen,
                    "-root", a.root, "-cert", a.cert, "-key", a.key]
            if a.keylog:
                argv += ["-keylog", a.keylog]
    else:
        argv = [PY, str(HERE / "aioquic/hq_client.py"), *a.urls, "--output", a.output]
        argv += ["--insecure"] if a.insecure else ["--ca", a.ca]
        if a.key_update_every:
            argv += ["--key-update", str(a.key_update_every * 1200)]
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
