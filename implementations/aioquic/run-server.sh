#!/usr/bin/env bash
# aioquic's HTTP/0.9 server (interop/aioquic/hq_server.py).
set -euo pipefail
IMPL=aioquic
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need WWW CERTS
args=(--host "$IP" --port "$PORT" --root "$WWW" --cert "$CERTS/cert.pem" --key "$CERTS/priv.key")
[ -n "$SSLKEYLOGFILE" ] && args+=(--secrets-log "$SSLKEYLOGFILE")
[ -n "$QLOGDIR" ] && args+=(--qlog-dir "$QLOGDIR")
export PYTHONUNBUFFERED=1
exec "$INTEROP/.venv/bin/python" "$INTEROP/aioquic/hq_server.py" "${args[@]}"
