#!/usr/bin/env bash
# Installs headless Chromium (Debian's `chromium` package) for the lab report's browser test
# (crates/mpq-lab/tests/report_browser.rs), if it is not there yet. Idempotent.
# Exit status 0 when chromium is available afterwards, 1 when it could not be installed
# (not root, no apt-get, or the install failed); the test command then lets that test skip.
set -uo pipefail

log() { echo "[setup-chromium] $*" >&2; }

if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "chromium is missing and cannot be installed here (needs root and apt-get)"
    exit 1
fi
log "installing chromium (apt)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends chromium >/tmp/setup-chromium.log 2>&1; then
    # The package lists may be missing or stale on a fresh machine.
    apt-get update >>/tmp/setup-chromium.log 2>&1
    if ! apt-get install -y --no-install-recommends chromium >>/tmp/setup-chromium.log 2>&1; then
        log "apt-get install chromium failed; see /tmp/setup-chromium.log"
        tail -5 /tmp/setup-chromium.log >&2
        exit 1
    fi
fi
command -v chromium >/dev/null 2>&1
