#!/usr/bin/env bash
# Idempotent install of everything the interop suite needs, from PyPI and the Go
# module proxy only:
#   interop/.venv                  Python venv with the pinned requirements.txt
#   interop/go/bin/quicgo-peer     the quic-go peer (interop/quicgo, go.sum committed)
#   interop/noq-peer/target/release/noq-peer
#                                  the noq (multipath) peer (crates.io, Cargo.lock committed)
# Safe to re-run: the venv is reused while requirements.txt is unchanged, go build
# is incremental.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
REQ="$HERE/requirements.txt"
STAMP="$VENV/.requirements.sha256"

log() { echo "[interop/setup] $*" >&2; }

# ---- Python -------------------------------------------------------------------------
PYTHON="${PYTHON:-$(command -v python3 || true)}"
if [ -z "$PYTHON" ]; then
    log "python3 not found"; exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
    log "$PYTHON is older than 3.10 (aioquic needs >= 3.10)"; exit 1
fi

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
    log "creating venv at $VENV"
    rm -rf "$VENV"
    if ! "$PYTHON" -m venv "$VENV"; then
        # Debian's python3 ships venv separately.
        if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
            log "python venv module missing, installing python3-venv"
            apt-get update -qq && apt-get install -y -qq python3-venv
            rm -rf "$VENV"
            "$PYTHON" -m venv "$VENV"
        else
            log "cannot create a venv with $PYTHON"; exit 1
        fi
    fi
fi

want="$(sha256sum "$REQ" | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ] || ! "$VENV/bin/python" -c 'import aioquic, pytest, cryptography' 2>/dev/null; then
    log "installing $(tr '\n' ' ' < "$REQ")"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ"
    echo "$want" > "$STAMP"
else
    log "venv up to date"
fi

# ---- Go -----------------------------------------------------------------------------
GO="${GO:-$(command -v go || true)}"
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then
    GO=/usr/local/go/bin/go
fi
if [ -z "$GO" ]; then
    log "go not found (need the Go toolchain named in interop/quicgo/go.mod)"; exit 1
fi
mkdir -p "$HERE/go/bin"
log "building quicgo-peer with $("$GO" version | cut -d' ' -f3)"
(cd "$HERE/quicgo" && "$GO" build -trimpath -o "$HERE/go/bin/quicgo-peer" .)

# ---- Debian: ngtcp2's HTTP/3 example client and server ------------------------------------
# gtlsclient / gtlsserver (ngtcp2 with GnuTLS) for the HTTP/3 cases; installed when missing
# and we may (root with apt-get), else those cases say what to install.
if ! command -v gtlsclient >/dev/null || ! PATH="$PATH:/usr/sbin" command -v gtlsserver >/dev/null; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        log "installing ngtcp2-client and ngtcp2-server (Debian)"
        apt-get install -y -qq ngtcp2-client ngtcp2-server >/dev/null 2>&1 \
            || { apt-get update -qq && apt-get install -y -qq ngtcp2-client ngtcp2-server >/dev/null; }
    else
        log "ngtcp2-client / ngtcp2-server not installed (apt-get install them as root for the HTTP/3 cases)"
    fi
fi

# ---- Rust: noq-peer ------------------------------------------------------------------
# Standalone Cargo project (own [workspace], excluded from the root one). Rebuilt only
# when its sources, Cargo.toml or Cargo.lock changed since the last successful build.
NOQ_DIR="$HERE/noq-peer"
NOQ_BIN="$NOQ_DIR/target/release/noq-peer"
NOQ_STAMP="$NOQ_DIR/target/.build-inputs.sha256"
CARGO="${CARGO:-$(command -v cargo || true)}"
if [ -z "$CARGO" ] && [ -x "$HOME/.cargo/bin/cargo" ]; then
    CARGO="$HOME/.cargo/bin/cargo"
fi
noq_want="$(cd "$NOQ_DIR" && cat Cargo.toml Cargo.lock $(find src -type f | sort) | sha256sum | cut -d' ' -f1)"
if [ -x "$NOQ_BIN" ] && [ "$(cat "$NOQ_STAMP" 2>/dev/null || true)" = "$noq_want" ]; then
    log "noq-peer up to date"
else
    if [ -z "$CARGO" ]; then
        log "cargo not found (needed to build interop/noq-peer)"; exit 1
    fi
    log "building noq-peer (cargo build --release --locked)"
    "$CARGO" build --release --locked --quiet --manifest-path "$NOQ_DIR/Cargo.toml"
    echo "$noq_want" > "$NOQ_STAMP"
fi

log "ready: $("$VENV/bin/python" -c 'import aioquic; print("aioquic", aioquic.__version__)'), ngtcp2 $(dpkg-query -W -f '${Version}' ngtcp2-client 2>/dev/null || echo '?'), quic-go $(grep 'github.com/quic-go/quic-go ' "$HERE/quicgo/go.mod" | awk '{print $NF}'), noq $(grep -A1 '^name = "noq"$' "$NOQ_DIR/Cargo.lock" | sed -n 's/^version = "\(.*\)"/\1/p')"
