#!/usr/bin/env bash
# aioquic is Python: nothing to build.
set -euo pipefail
IMPL=aioquic
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
[ -x "$INTEROP/.venv/bin/python" ] || { echo "aioquic: run implementations/aioquic/setup-env.sh first" >&2; exit 1; }
