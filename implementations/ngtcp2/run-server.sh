#!/usr/bin/env bash
# ngtcp2's HTTP/3 example server (gtlsserver): it speaks only HTTP/3, so the lab pairs it with
# ngtcp2's client.
set -euo pipefail
IMPL=ngtcp2
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need WWW CERTS
server=$(PATH="$PATH:/usr/sbin" command -v gtlsserver)
args=(-d "$WWW" --quiet)
[ -n "$QLOGDIR" ] && args+=(--qlog-dir="$QLOGDIR")
addr=$IP
[ "$addr" = 0.0.0.0 ] || [ "$addr" = "::" ] && addr='*'
exec "$server" "${args[@]}" "$addr" "$PORT" "$CERTS/priv.key" "$CERTS/cert.pem"
