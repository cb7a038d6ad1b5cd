#!/usr/bin/env bash
# noq's HTTP/0.9 client (interop/noq-peer, multipath on): a path from each of the first two
# addresses of CLIENT_IPS (noq-peer opens at most two); it does not verify the server.
set -euo pipefail
IMPL=noq
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need REQUESTS DOWNLOADS
args=(client --output "$DOWNLOADS" --timeout 600)
for ip in "${client_ips[@]:0:2}"; do args+=(--local "$(hostport "$ip" 0)"); done
[ "${#client_ips[@]}" -eq 1 ] && args+=(--max-path-id 0)
exec "$INTEROP/noq-peer/target/release/noq-peer" "${args[@]}" "${urls[@]}"
