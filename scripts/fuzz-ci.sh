#!/usr/bin/env bash
# Builds every fuzz target in fuzz/ and runs each for a bounded time, starting from its corpus
# in fuzz/corpus/<target>/ (kept in the repository, minimised). Any failing input (panic,
# sanitizer report, timeout, out of memory) makes the script fail; the input is printed
# (hex) and left in fuzz/artifacts/<target>/ (not in git). New corpus entries found during
# the run go to a scratch directory, so the committed corpus only changes by hand (see
# fuzz/README.md).
#
# Usage: scripts/fuzz-ci.sh [SECONDS_PER_TARGET]     (default 60)
#
# Toolchain: libFuzzer instrumentation needs nightly rustc flags. With a nightly toolchain
# installed (or installable: `rustup toolchain install nightly`) targets are built with
# AddressSanitizer; otherwise the stable toolchain is used with RUSTC_BOOTSTRAP=1, still
# with ASan (stable ships the sanitizer runtimes). MPQ_FUZZ_SANITIZER=none skips ASan
# (three times the executions per second for conn_frames).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SECONDS_PER_TARGET=${1:-60}
# A fixed libFuzzer seed by default: the test command must not fail at random on a bug
# that a run with another seed happened to reach (long exploratory runs use other seeds;
# see fuzz/README.md). MPQ_FUZZ_SEED=0 lets libFuzzer pick one.
SEED=${MPQ_FUZZ_SEED:-20261124}
CARGO_FUZZ_VERSION=0.13.1
SANITIZER=${MPQ_FUZZ_SANITIZER:-address}
export CARGO_TERM_COLOR=never

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

# MPQ_FUZZ_TOOLCHAIN=stable forces the fallback (to test it where nightly is installed).
TOOLCHAIN=()
if [ "${MPQ_FUZZ_TOOLCHAIN:-}" != stable ] && { rustup toolchain list 2>/dev/null | grep -q '^nightly' \
    || rustup toolchain install nightly --profile minimal >/dev/null 2>&1; }; then
    TOOLCHAIN=(+nightly)
    echo "== fuzzing with the nightly toolchain ($(rustc +nightly --version))"
else
    export RUSTC_BOOTSTRAP=1
    echo "== no nightly toolchain: stable with RUSTC_BOOTSTRAP=1 ($(rustc --version))"
fi

cd fuzz
echo "== cargo fuzz build (sanitizer: $SANITIZER)"
cargo "${TOOLCHAIN[@]}" fuzz build -s "$SANITIZER"

# Runs one target; prints its result and, on failure, the failing inputs. Exit status: the
# fuzzer's.
run_target() {
    local target=$1 corpus="corpus/$1" scratch log rc=0
    scratch=$(mktemp -d)
    log="$scratch.log"
    mkdir -p "$corpus" "artifacts/$target"
    # -rss_limit_mb: the targets check their own heap bounds; this catches the rest.
    # fuzz/regressions/<target>/ holds inputs that once failed: read as a corpus, each runs first.
    local extra=()
    [ -d "regressions/$target" ] && extra=("regressions/$target")
    cargo "${TOOLCHAIN[@]}" fuzz run -s "$SANITIZER" "$target" "$scratch" "$corpus" "${extra[@]}" -- \
        -seed="$SEED" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 \
        >"$log" 2>&1 || rc=$?
    {
        echo "== $target: $(find "$corpus" -type f | wc -l) corpus files, ${SECONDS_PER_TARGET}s, exit $rc"
        grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$log" || true
        if [ "$rc" -ne 0 ]; then
            tail -n 60 "$log"
            for f in "artifacts/$target"/*; do
                [ -f "$f" ] || continue
                echo "-- failing input $f ($(wc -c <"$f") bytes):"
                od -An -tx1 -v "$f" | head -n 64
            done
        fi
    } >"$scratch.report"
    cat "$scratch.report"
    rm -rf "$scratch" "$log" "$scratch.report"
    return "$rc"
}

# Targets run MPQ_FUZZ_JOBS at a time (default 2: CI machines have two cores).
JOBS=${MPQ_FUZZ_JOBS:-2}
failed=()
targets=($(cargo "${TOOLCHAIN[@]}" fuzz list))
for ((i = 0; i < ${#targets[@]}; i += JOBS)); do
    pids=()
    batch=("${targets[@]:i:JOBS}")
    for target in "${batch[@]}"; do
        run_target "$target" &
        pids+=($!)
    done
    for j in "${!pids[@]}"; do
        wait "${pids[$j]}" || failed+=("${batch[$j]}")
    done
done

if [ ${#failed[@]} -ne 0 ]; then
    echo "== fuzzing FAILED: ${failed[*]}"
    exit 1
fi
echo "== fuzzing passed"
