#!/usr/bin/env bash
# ngtcp2 comes built from Debian: check that its examples are there.
set -euo pipefail
IMPL=ngtcp2
# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
command -v gtlsclient >/dev/null && PATH="$PATH:/usr/sbin" command -v gtlsserver >/dev/null \
    || { echo "ngtcp2: gtlsclient/gtlsserver missing: run implementations/ngtcp2/setup-env.sh as root" >&2; exit 1; }
