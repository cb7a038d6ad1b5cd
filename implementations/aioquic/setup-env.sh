#!/usr/bin/env bash
# aioquic from PyPI into interop/.venv (requirements.txt pins it).
set -euo pipefail
IMPL=aioquic
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
exec "$INTEROP/setup.sh" python
