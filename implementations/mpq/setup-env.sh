#!/usr/bin/env bash
# mpq needs nothing beyond the Rust toolchain (rustup, see README.md).
set -euo pipefail
IMPL=mpq
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
command -v cargo >/dev/null || { echo "mpq: cargo not found (install Rust with rustup)" >&2; exit 1; }
