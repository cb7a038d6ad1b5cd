#!/usr/bin/env bash
# Builds mpq (release) unless MPQ names a binary already, as the lab's runs do.
set -euo pipefail
IMPL=mpq
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
if [ -n "${MPQ:-}" ] && [ -x "$MPQ" ]; then
    exit 0
fi
cargo build --release --locked -q -p mpq --manifest-path "$REPO/Cargo.toml"
