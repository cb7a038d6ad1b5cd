#!/usr/bin/env bash
# quinn's HTTP/0.9 client (interop/quinn-peer): one path, from the first address of CLIENT_IPS.
set -euo pipefail
IMPL=quinn
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need REQUESTS DOWNLOADS CERTS
[ -f "$CERTS/ca.pem" ] || { echo "quinn: quinn-peer's client always verifies: put ca.pem in CERTS" >&2; exit 1; }
args=(client --output "$DOWNLOADS" --ca "$CERTS/ca.pem" --timeout 600)
[ "${#client_ips[@]}" -gt 0 ] && args+=(--local "$(hostport "${client_ips[0]}" 0)")
exec "$INTEROP/quinn-peer/target/release/quinn-peer" "${args[@]}" "${urls[@]}"
