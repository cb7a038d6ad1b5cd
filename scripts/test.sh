#!/usr/bin/env bash
# The project's test command: Rust unit, property and simulator tests, clippy, then the
# interoperability suite (aioquic and quic-go peers, noq multipath peer, mpq against itself; all
# over loopback UDP) against the test profile's build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CARGO_TERM_COLOR=never
# Each stage's heading says how long the run has taken so far (where CI time goes).
stage() { echo "== [$((SECONDS / 60)) min $((SECONDS % 60)) s] $*"; }
trap 'echo "== [$((SECONDS / 60)) min $((SECONDS % 60)) s] done (exit $?)"' EXIT
stage "cargo fmt --check"
cargo fmt --all -- --check
stage "cargo clippy"
# (The tokio example and the streams' tokio traits are behind mpq-api's `tokio` feature,
# linted in the same pass: a second pass for it took a minute.)
cargo clippy --workspace --all-targets --features mpq-api/tokio --locked -- -D warnings
# (Build-time-only dependencies that Cargo.toml does not name at opt-level 0, or named ones
# now used at run time too: a note, not a failure; builds or tests are slower. docs/ci.md.)
scripts/build-only-deps.sh --check || echo "note: scripts/build-only-deps.sh could not list the dependencies (see above)"
stage "chromium for the lab report's browser test"
if scripts/setup-chromium.sh; then
    # Installed: a missing browser is now a failure, not a skip.
    export MPQ_REQUIRE_CHROMIUM=1
else
    echo "chromium could not be installed: the report's browser test will be skipped"
fi
stage "kernel testbed (network namespaces, TUN) for mpq lab testbed's tests"
if [ "$(id -u)" = 0 ] && [ -e /dev/net/tun ] && command -v ip >/dev/null; then
    # Root with TUN and iproute2: a testbed test that cannot run is now a failure, not a skip.
    export MPQ_REQUIRE_NETNS=1
else
    echo "not root, or no /dev/net/tun or ip: the testbed tests will be skipped"
fi
stage "perf for the lab's --profile test"
if ! command -v perf >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq linux-perf >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq linux-perf >/dev/null; } \
        || echo "linux-perf could not be installed: the lab's profile test will fail under MPQ_REQUIRE_NETNS"
fi
stage "OpenSSH's server and client for the lab's SSH-testbed test (sshd in namespaces)"
if ! [ -x /usr/sbin/sshd ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    # (Not started as a service: the test runs its own sshd in each namespace.)
    apt-get install -y -qq openssh-server openssh-client >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq openssh-server openssh-client >/dev/null; } \
        || echo "openssh-server could not be installed: the SSH-testbed test will fail under MPQ_REQUIRE_NETNS"
fi
stage "cargo test"
# (With mpq-api's `tokio` feature, as clippy ran: the tokio example is built too, and the
# examples' binaries below are this build's.)
cargo test --workspace --locked --features mpq-api/tokio
stage "the application API's examples (mpq-api), in both runtimes"
# (Run from target/debug/examples, where `cargo test` left them: `cargo run -p mpq-api`
# resolves other features than the workspace's and rebuilt for 50 s.)
target/debug/examples/echo --paths 2 --threads per-path
target/debug/examples/echo --paths 2 --threads single
target/debug/examples/tokio_echo
# (30 s per target from the committed corpus catches regressions; scripts/fuzz-long.sh
# explores.)
stage "fuzz targets (30 s each, corpus in fuzz/corpus)"
scripts/fuzz-ci.sh 30
# The interop suite runs the test profile's binary (`cargo test` built it: our crates at
# opt-level 1, with debug assertions and overflow checks, which a peer's packets then
# exercise too); the release build (fat LTO, one codegen unit) took 8 of CI's 56 minutes.
# That the release profile still compiles (code under cfg(debug_assertions)) is checked.
stage "release profile type-check (cargo check --release of the crates with debug-only code)"
# What the release profile compiles that clippy's and the tests' debug builds do not is code
# under cfg(debug_assertions), off there: type-check the crates that have such code. It is
# all in mpq-proto today, checked without aws-lc's C build (its default crypto provider; ring
# instead, which that code does not touch): 24 s against 2 minutes for all of `mpq`.
# (grep finding nothing fails the pipeline: `|| true`, or set -e would end the script here.)
debug_only=$({ grep -rl --include='*.rs' 'debug_assertions' crates || true; } | cut -d/ -f2 | sort -u)
if [ "$debug_only" = mpq-proto ]; then
    cargo check --release --locked -p mpq-proto --no-default-features
elif [ -n "$debug_only" ]; then
    cargo check --release --locked $(printf -- '-p %s ' $debug_only)
fi
stage "interop (aioquic, quic-go, noq multipath, mpq multi-address CLI)"
# `cargo test` built target/debug/mpq for mpq's integration tests, from this tree. (Building
# it with `cargo build -p mpq` instead rebuilt 15 crates for 2.4 minutes: another feature
# set than the workspace's tests unify.)
test -x target/debug/mpq || cargo build --locked -p mpq
# Two cases at a time (pytest-xdist): most of a case is waiting on timers, handshakes and
# the peers' start, and the suite took 428 s one at a time, 260 s two at a time (2026-12-04).
MPQ_BIN="$PWD/target/debug/mpq" INTEROP_REQUIRE_MPQ=1 interop/run.sh -n 2
