#!/usr/bin/env bash
# quic-go's HTTP/0.9 client (interop/quicgo): one path; the kernel picks the source address
# (the route to the server, i.e. the testbed's first path).
set -euo pipefail
IMPL=quicgo
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need REQUESTS DOWNLOADS
args=(client -output "$DOWNLOADS" -timeout 600s)
if [ -n "${CERTS:-}" ] && [ -f "$CERTS/ca.pem" ]; then args+=(-ca "$CERTS/ca.pem"); else args+=(-insecure); fi
[ -n "$SSLKEYLOGFILE" ] && args+=(-keylog "$SSLKEYLOGFILE")
[ -n "$QLOGDIR" ] && args+=(-qlog-dir "$QLOGDIR")
export QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING=1
exec "$INTEROP/go/bin/quicgo-peer" "${args[@]}" "${urls[@]}"
