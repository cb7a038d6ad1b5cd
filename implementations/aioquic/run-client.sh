#!/usr/bin/env bash
# aioquic's HTTP/0.9 client (interop/aioquic/hq_client.py): one path; the kernel picks the
# source address.
set -euo pipefail
IMPL=aioquic
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need REQUESTS DOWNLOADS
args=(--output "$DOWNLOADS" --timeout 600)
if [ -n "${CERTS:-}" ] && [ -f "$CERTS/ca.pem" ]; then args+=(--ca "$CERTS/ca.pem"); else args+=(--insecure); fi
[ -n "$SSLKEYLOGFILE" ] && args+=(--secrets-log "$SSLKEYLOGFILE")
[ -n "$QLOGDIR" ] && args+=(--qlog-dir "$QLOGDIR")
export PYTHONUNBUFFERED=1
exec "$INTEROP/.venv/bin/python" "$INTEROP/aioquic/hq_client.py" "${args[@]}" "${urls[@]}"
