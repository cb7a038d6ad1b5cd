#!/usr/bin/env bash
# noq-peer needs only the Rust toolchain; its crates come from crates.io at build time.
set -euo pipefail
IMPL=noq
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
command -v cargo >/dev/null || [ -x "$HOME/.cargo/bin/cargo" ] || { echo "$IMPL: cargo not found (install Rust with rustup)" >&2; exit 1; }
