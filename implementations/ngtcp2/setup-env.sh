#!/usr/bin/env bash
# ngtcp2's GnuTLS example client and server from Debian (ngtcp2-client, ngtcp2-server).
set -euo pipefail
IMPL=ngtcp2
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
exec "$INTEROP/setup.sh" ngtcp2
