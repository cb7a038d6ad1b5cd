"""The interop matrix: which cases passed for which client -> server pair, from a pytest
JUnit XML report of this suite (issue F item 8: "the README shows the matrix").

    interop/run.sh --junitxml /tmp/interop.xml
    interop/.venv/bin/python interop/matrix.py /tmp/interop.xml

Prints one Markdown table per test file (the suite's own cases, the interop runner's endpoint
contract, multipath, HTTP/3): a row per case, a column per client -> server pair, each cell "ok",
"FAIL", "skip" or empty (the pair is not run for that case; interop/README.md says why).
"""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

IMPLS = "mpq|aioquic|quicgo|noq|quinn|ngtcp2"
ID_RE = re.compile(rf"^(?P<test>\w+)\[(?P<case>.+)-(?P<client>{IMPLS})-(?P<server>{IMPLS})\]$")
TITLES = {
    "test_interop": "The suite's cases (test_interop.py)",
    "test_endpoint_contract": "The interop runner's endpoint contract (test_endpoint_contract.py)",
    "test_interop_multipath": "Multipath, RFC 10069 (test_interop_multipath.py)",
    "test_interop_http3": "HTTP/3, RFC 9114 (test_interop_http3.py)",
}


def outcome(tc: ET.Element) -> str:
    if tc.find("failure") is not None or tc.find("error") is not None:
        return "FAIL"
    if tc.find("skipped") is not None:
        return "skip"
    return "ok"


def matrices(xml_path: str) -> dict[str, dict[str, dict[str, str]]]:
    """{file: {case: {"client -> server": outcome}}}, in report order."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for tc in ET.parse(xml_path).iter("testcase"):
        m = ID_RE.match(tc.get("name", ""))
        if not m:
            continue
        module = (tc.get("classname") or "").rsplit(".", 1)[-1]
        pair = f"{m['client']} -> {m['server']}"
        out.setdefault(module, {}).setdefault(m["case"], {})[pair] = outcome(tc)
    return out


def render(module: str, rows: dict[str, dict[str, str]]) -> str:
    pairs: list[str] = []
    for cells in rows.values():
        for p in cells:
            if p not in pairs:
                pairs.append(p)
    lines = [f"**{TITLES.get(module, module)}**", "", "| case | " + " | ".join(pairs) + " |"]
    lines.append("| --- |" + " --- |" * len(pairs))
    for case, cells in rows.items():
        lines.append(f"| {case} | " + " | ".join(cells.get(p, "") for p in pairs) + " |")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    found = matrices(sys.argv[1])
    if not found:
        print(f"{sys.argv[1]}: no parametrised interop cases in this report", file=sys.stderr)
        return 1
    print("\n\n".join(render(m, rows) for m, rows in found.items()))
    failed = sum(v == "FAIL" for rows in found.values() for cells in rows.values() for v in cells.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
