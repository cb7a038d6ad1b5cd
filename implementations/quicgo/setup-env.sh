#!/usr/bin/env bash
# quic-go needs the Go toolchain (>= 1.26, as quic-go v0.65 requires); modules come from the Go proxy.
set -euo pipefail
IMPL=quicgo
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || { echo "quicgo: go not found (install Go >= 1.26)" >&2; exit 1; }
