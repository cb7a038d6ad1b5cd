#!/usr/bin/env bash
# noq's HTTP/0.9 server (interop/noq-peer, multipath on; it makes its own certificate).
set -euo pipefail
IMPL=noq
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need WWW
exec "$INTEROP/noq-peer/target/release/noq-peer" server --listen "$(hostport "$IP" "$PORT")" --root "$WWW"
