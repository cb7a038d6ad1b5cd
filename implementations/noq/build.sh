#!/usr/bin/env bash
# Builds interop/noq-peer (release, Cargo.lock committed); quick when nothing changed.
set -euo pipefail
IMPL=noq
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
exec "$INTEROP/setup.sh" noq
