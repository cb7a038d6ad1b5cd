#!/usr/bin/env bash
# Long fuzzing runs (millions of executions), as opposed to CI's minute per target
# (scripts/fuzz-ci.sh). Builds TARGET without a sanitizer and with coverage instrumentation
# limited to mpq-proto and the fuzz crate: rustls, ring and the other dependencies run
# uninstrumented, so an execution is cheaper and the coverage signal is our code's. Then runs
# JOBS libFuzzer processes (distinct seeds, niced) from the committed corpus until together
# they executed TOTAL_RUNS inputs, and prints the total. A failing input stops its process and
# is left in fuzz/artifacts/TARGET/ (printed); the exit status is then non-zero.
#
# Needs a nightly toolchain (`-Zprofile-rustflags`). New corpus entries go to
# $MPQ_FUZZ_WORK/TARGET/ (default /tmp/mpq-fuzz-long), not into the repository.
#
# Usage: scripts/fuzz-long.sh TARGET TOTAL_RUNS [JOBS]     e.g. conn_frames 10000000 2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=${1:?target name (see fuzz/fuzz_targets)}
total=${2:?total executions}
jobs=${3:-2}
work=${MPQ_FUZZ_WORK:-/tmp/mpq-fuzz-long}/$target
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
tdir=${CARGO_TARGET_DIR:-fuzz/target}/long

# The flags cargo-fuzz gives every crate, given here to ours only.
cov='["-Cpasses=sancov-module","-Cllvm-args=-sanitizer-coverage-level=4",'
cov+='"-Cllvm-args=-sanitizer-coverage-inline-8bit-counters","-Cllvm-args=-sanitizer-coverage-pc-table",'
cov+='"-Cllvm-args=-simplifycfg-branch-fold-threshold=0","-Cllvm-args=-sanitizer-coverage-stack-depth"]'
echo "== building $target (coverage: mpq-proto and the fuzz crate)"
RUSTFLAGS="--cfg fuzzing -Cdebug-assertions -Ccodegen-units=1" cargo +nightly build -Zprofile-rustflags \
    --manifest-path fuzz/Cargo.toml --target "$triple" --release \
    --config 'profile.release.debug="line-tables-only"' \
    --config "profile.release.package.mpq-proto.rustflags=$cov" \
    --config "profile.release.package.mpq-fuzz.rustflags=$cov" \
    --bin "$target" --target-dir "$tdir"
bin=$tdir/$triple/release/$target

mkdir -p "$work" "fuzz/artifacts/$target"
per_job=$(( (total + jobs - 1) / jobs ))
echo "== $jobs processes x $per_job executions; logs in $work/job*.log"
pids=()
for j in $(seq 1 "$jobs"); do
    mkdir -p "$work/out$j"
    nice -n 19 "$bin" -runs="$per_job" -seed="$((RANDOM + j))" -timeout=30 -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$target/" "$work/out$j" "fuzz/corpus/$target" \
        > "$work/job$j.log" 2>&1 &
    pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
done_runs=$(awk '/^stat::number_of_executed_units:/ { s += $2 } END { print s + 0 }' "$work"/job*.log)
echo "== $target: $done_runs executions"
if [ "$status" -ne 0 ]; then
    grep -h -A3 "panicked\|ERROR: libFuzzer\|SUMMARY" "$work"/job*.log | head -40
    ls "fuzz/artifacts/$target/"
fi
exit "$status"
