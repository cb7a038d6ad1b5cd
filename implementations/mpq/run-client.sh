#!/usr/bin/env bash
# mpq's HTTP/0.9 client (`mpq client`): a path from each address of CLIENT_IPS.
set -euo pipefail
IMPL=mpq
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
MPQ=${MPQ:-mpq}
bulk_case || unsupported
need REQUESTS DOWNLOADS
args=(client --output "$DOWNLOADS" --timeout 600)
if [ -n "${CERTS:-}" ] && [ -f "$CERTS/ca.pem" ]; then args+=(--ca "$CERTS/ca.pem"); else args+=(--insecure); fi
for ip in "${client_ips[@]}"; do args+=(--local "$(hostport "$ip" 0)"); done
[ "${#client_ips[@]}" -eq 1 ] && args+=(--no-multipath)
[ -n "$QLOGDIR" ] && args+=(--qlog-dir "$QLOGDIR")
# (mpq client reads SSLKEYLOGFILE itself.)
exec "$MPQ" "${args[@]}" "${urls[@]}"
