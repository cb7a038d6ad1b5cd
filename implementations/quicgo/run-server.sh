#!/usr/bin/env bash
# quic-go's HTTP/0.9 server (interop/quicgo).
set -euo pipefail
IMPL=quicgo
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need WWW CERTS
args=(server -listen "$(hostport "$IP" "$PORT")" -root "$WWW" -cert "$CERTS/cert.pem" -key "$CERTS/priv.key")
[ -n "$SSLKEYLOGFILE" ] && args+=(-keylog "$SSLKEYLOGFILE")
[ -n "$QLOGDIR" ] && args+=(-qlog-dir "$QLOGDIR")
export QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=1
exec "$INTEROP/go/bin/quicgo-peer" "${args[@]}"
