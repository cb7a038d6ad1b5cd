#!/usr/bin/env python3
"""Categorised CPU profile of one process from a `perf record` file.

Reads `perf report --no-children --sort sym` of PERF_DATA (self time per symbol) and sums the
shares by category: locking and waiting (mutexes, futexes, in user space and the kernel),
crypto (AEAD, header protection), memory copies (user memmove and the kernel's copies to and
from user space), hashing, allocation, packet I/O in user space, the application (the perf
tool's or the API's code above the connection), QUIC logic (the rest of mpq's or quinn's
protocol code), kernel UDP / syscalls / scheduling, other. Several files give one column
each, for before / after tables.

`--seed000` adds the coarser table seed 000 used for mcMPQUIC's profile: packet I/O (user
and kernel), crypto, connection management (QUIC logic, copies, hashing, allocation),
locking, application, other, plus seed 001's ACK handling. The regex map is
crates/mpq-lab/data/perf-categories.tsv, shared with `mpq lab run --profile`.

Record with `perf record -e cpu-clock -g -o FILE -- mpq perf server ...` (on VMs without
hardware counters `cpu-clock` is the event that works).

Usage: scripts/perf_categories.py [--markdown] LABEL=PERF_DATA [LABEL=PERF_DATA ...]
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

# The regex map lives in crates/mpq-lab/data/perf-categories.tsv (the lab's `--profile`
# reads the same file): category, report category, whether matching kernel symbols count
# there, regex; the first match wins.
MAP = Path(__file__).resolve().parent.parent / "crates/mpq-lab/data/perf-categories.tsv"
KERNEL = "kernel UDP, syscalls, scheduling"


def load_map(path=MAP):
    """[(category, report category, kernel symbols count, compiled regex)] from the TSV."""
    rules = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, report, kernel, pattern = line.split("\t")
        rules.append((name, report, kernel == "kernel", re.compile(pattern, re.IGNORECASE)))
    return rules


RULES = load_map()
CATEGORIES = [(name, rx) for name, _, _, rx in RULES]


def symbols(path):
    """(share in %, is_kernel, symbol) per line of perf's flat report."""
    out = subprocess.run(
        ["perf", "report", "-i", path, "--no-children", "--sort", "sym", "--stdio", "-g", "none", "--percent-limit", "0"],
        capture_output=True, text=True, check=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+\[(.)\]\s+(.*)", line)
        if m:
            rows.append((float(m.group(1)), m.group(2) == "k", m.group(3).strip()))
    return rows


def categorise(rows):
    totals = {name: 0.0 for name, _ in CATEGORIES}
    totals[KERNEL] = 0.0
    totals["other"] = 0.0
    for share, kernel, sym in rows:
        for name, _, kernel_too, rx in RULES:
            if rx.search(sym):
                # Kernel copies and futexes count as copies and locking; other kernel time
                # below.
                if kernel and not kernel_too:
                    continue
                totals[name] += share
                break
        else:
            totals[KERNEL if kernel else "other"] += share
    return totals


def seed000(totals):
    """The coarse table: seed 000's categories plus seed 001's ACK handling."""
    coarse = {}
    for name, report, _, _ in RULES:
        coarse[report] = coarse.get(report, 0.0) + totals[name]
    coarse["packet I/O"] = coarse.get("packet I/O", 0.0) + totals[KERNEL]
    coarse["other"] = totals["other"]
    return coarse


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (default: plain columns)")
    ap.add_argument("--seed000", action="store_true", help="also the table in seed 000's categories")
    ap.add_argument("files", nargs="+", metavar="LABEL=PERF_DATA")
    args = ap.parse_args()
    columns = []
    for spec in args.files:
        label, sep, path = spec.partition("=")
        if not sep:
            label, path = spec, spec
        try:
            columns.append((label, categorise(symbols(path))))
        except (subprocess.CalledProcessError, FileNotFoundError) as e:
            sys.exit(f"perf report failed on {path}: {e} (is it a perf.data file, and is perf installed?)")
    table(columns, args.markdown)
    if args.seed000:
        print()
        table([(label, seed000(c)) for label, c in columns], args.markdown)


def table(columns, markdown):
    names = list(columns[0][1].keys())
    if markdown:
        print("| category | " + " | ".join(l for l, _ in columns) + " |")
        print("| --- |" + " --- |" * len(columns))
        for n in names:
            print(f"| {n} | " + " | ".join(f"{c[n]:.1f} %" for _, c in columns) + " |")
    else:
        width = max(len(n) for n in names)
        print(" " * width + "  " + "  ".join(f"{l:>12}" for l, _ in columns))
        for n in names:
            print(f"{n:<{width}}  " + "  ".join(f"{c[n]:>11.1f}%" for _, c in columns))


if __name__ == "__main__":
    main()
