#!/usr/bin/env bash
# quinn's HTTP/0.9 server (interop/quinn-peer).
set -euo pipefail
IMPL=quinn
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need WWW CERTS
args=(server --listen "$(hostport "$IP" "$PORT")" --root "$WWW" --cert "$CERTS/cert.pem" --key "$CERTS/priv.key")
[ -n "$SSLKEYLOGFILE" ] && args+=(--keylog "$SSLKEYLOGFILE")
exec "$INTEROP/quinn-peer/target/release/quinn-peer" "${args[@]}"
