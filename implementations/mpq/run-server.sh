#!/usr/bin/env bash
# mpq's HTTP/0.9 file server (`mpq server`), multipath on.
set -euo pipefail
IMPL=mpq
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
MPQ=${MPQ:-mpq}
bulk_case || unsupported
need WWW CERTS
args=(server --listen "$(hostport "$IP" "$PORT")" --root "$WWW" --cert "$CERTS/cert.pem" --key "$CERTS/priv.key")
[ -n "$SSLKEYLOGFILE" ] && args+=(--keylog "$SSLKEYLOGFILE")
[ -n "$QLOGDIR" ] && args+=(--qlog-dir "$QLOGDIR")
exec "$MPQ" "${args[@]}"
