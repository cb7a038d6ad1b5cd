#!/usr/bin/env bash
# Idempotent install of everything the interop suite needs, from PyPI and the Go
# module proxy only:
#   interop/.venv                  Python venv with the pinned requirements.txt
#   interop/go/bin/quicgo-peer     the quic-go peer (interop/quicgo, go.sum committed)
#   interop/noq-peer/target/release/noq-peer
#                                  the noq (multipath) peer (crates.io, Cargo.lock committed)
#   interop/quinn-peer/target/release/quinn-peer
#                                  the quinn peer (crates.io, Cargo.lock committed)
# Safe to re-run: the venv is reused while requirements.txt is unchanged, go build
# is incremental.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
REQ="$HERE/requirements.txt"
STAMP="$VENV/.requirements.sha256"

log() { echo "[interop/setup] $*" >&2; }

# Components to set up (default: all). The lab's implementation folders (implementations/*/)
# ask for one each: `interop/setup.sh quinn`.
ALL="python go ngtcp2 noq quinn"
WANT="${*:-$ALL}"
for w in $WANT; do
    case " $ALL " in *" $w "*) ;; *) log "unknown component '$w' (expected some of: $ALL)"; exit 2 ;; esac
done
wants() { case " $WANT " in *" $1 "*) return 0 ;; esac; return 1; }

# ---- Python -------------------------------------------------------------------------
if wants python; then
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

fi

# ---- Go -----------------------------------------------------------------------------
if wants go; then
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

fi

# ---- Debian: ngtcp2's HTTP/3 example client and server ------------------------------------
if wants ngtcp2; then
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

fi

# ---- Rust: noq-peer and quinn-peer ---------------------------------------------------
# Standalone Cargo projects (own [workspace], excluded from the root one). Each is rebuilt
# only when its sources, Cargo.toml or Cargo.lock changed since its last successful build.
CARGO="${CARGO:-$(command -v cargo || true)}"
if [ -z "$CARGO" ] && [ -x "$HOME/.cargo/bin/cargo" ]; then
    CARGO="$HOME/.cargo/bin/cargo"
fi
build_rust_peer() {  # $1: the peer's directory name under interop/ (its binary has the same name)
    local dir="$HERE/$1" bin="$HERE/$1/target/release/$1" stamp="$HERE/$1/target/.build-inputs.sha256" want
    want="$(cd "$dir" && cat Cargo.toml Cargo.lock $(find src -type f | sort) | sha256sum | cut -d' ' -f1)"
    if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ]; then
        log "$1 up to date"
        return
    fi
    if [ -z "$CARGO" ]; then
        log "cargo not found (needed to build interop/$1)"; exit 1
    fi
    log "building $1 (cargo build --release --locked)"
    # One target directory for both peers: they pin the same tokio, rustls, ring and clap,
    # which are then compiled once (the second peer took 25 s instead of about 80).
    CARGO_TARGET_DIR="$HERE/target/rust-peers" "$CARGO" build --release --locked --quiet --manifest-path "$dir/Cargo.toml"
    mkdir -p "$(dirname "$bin")"
    cp "$HERE/target/rust-peers/release/$1" "$bin"
    echo "$want" > "$stamp"
}
if wants noq; then build_rust_peer noq-peer; fi
if wants quinn; then build_rust_peer quinn-peer; fi
[ "$WANT" = "$ALL" ] || exit 0
NOQ_DIR="$HERE/noq-peer"

log "ready: $("$VENV/bin/python" -c 'import aioquic; print("aioquic", aioquic.__version__)'), ngtcp2 $(dpkg-query -W -f '${Version}' ngtcp2-client 2>/dev/null || echo '?'), quic-go $(grep 'github.com/quic-go/quic-go ' "$HERE/quicgo/go.mod" | awk '{print $NF}'), noq $(grep -A1 '^name = "noq"$' "$NOQ_DIR/Cargo.lock" | sed -n 's/^version = "\(.*\)"/\1/p'), quinn $(grep -A1 '^name = "quinn"$' "$HERE/quinn-peer/Cargo.lock" | sed -n 's/^version = "\(.*\)"/\1/p')"
