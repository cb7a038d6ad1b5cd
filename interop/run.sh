#!/usr/bin/env bash
# Install what the interop suite needs (setup.sh), then run it with pytest.
# Extra arguments go to pytest, e.g.:  interop/run.sh -k keyupdate   interop/run.sh -m "not mpq"
# Exit status: pytest's (0 when every case passed or was skipped, e.g. no mpq binary yet);
# "no tests collected" (pytest's 5, e.g. a -k that matches nothing) also counts as success.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

"$HERE/setup.sh" || { echo "[interop/run] setup.sh failed" >&2; exit 1; }

# Peers were just installed: a missing one is a harness bug, not a reason to skip.
export INTEROP_REQUIRE_PEERS="${INTEROP_REQUIRE_PEERS:-1}"

cd "$HERE"
start=$(date +%s)
# The JUnit report feeds the interop matrix printed at the end (matrix.py; INTEROP_REPORT
# keeps it where you say).
report="${INTEROP_REPORT:-$(mktemp -t interop-report.XXXXXX.xml)}"
"$HERE/.venv/bin/python" -m pytest -c "$HERE/pytest.ini" --junitxml "$report" "$@"
rc=$?
echo "[interop/run] pytest exit code $rc after $(( $(date +%s) - start ))s" >&2
if [ -s "$report" ]; then
    echo "[interop/run] interop matrix (client -> server):" >&2
    "$HERE/.venv/bin/python" "$HERE/matrix.py" "$report" >&2 || true
fi
[ -z "${INTEROP_REPORT:-}" ] && rm -f "$report"
if [ "$rc" -eq 5 ]; then
    echo "[interop/run] no tests collected: treating as success" >&2
    rc=0
fi
exit "$rc"
