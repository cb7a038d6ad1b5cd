#!/usr/bin/env bash
# ngtcp2's HTTP/3 example client (gtlsclient): one path; it does not verify the server.
set -euo pipefail
IMPL=ngtcp2
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bulk_case || unsupported
need REQUESTS DOWNLOADS
# gtlsclient takes the server as HOST PORT besides the URLs: those of the first URL.
authority=${urls[0]#https://}
authority=${authority%%/*}
port=${authority##*:}
host=${authority%:*}
host=${host#[}
host=${host%]}
# (--timeout is its idle timeout.)
args=(--quiet --exit-on-all-streams-close --download "$DOWNLOADS" --timeout 30s)
[ -n "$QLOGDIR" ] && args+=(--qlog-dir="$QLOGDIR")
exec gtlsclient "${args[@]}" "$host" "$port" "${urls[@]}"
