#!/usr/bin/env bash
# Builds interop/quicgo into interop/go/bin/quicgo-peer (go.sum committed).
set -euo pipefail
IMPL=quicgo
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
exec "$INTEROP/setup.sh" go
