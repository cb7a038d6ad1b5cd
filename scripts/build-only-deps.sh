#!/usr/bin/env bash
# The dependencies that only run while building (procedural macros, build scripts and what
# they use), which Cargo.toml names at opt-level 0 for test and clippy builds (there
# `[profile.dev.package."*"]` outranks Cargo's `build-override`; see docs/ci.md).
#
#   scripts/build-only-deps.sh          print them, one per line
#   scripts/build-only-deps.sh --check  say which of them Cargo.toml does not name, and which
#                                       it names that now run in the tests too (exit 0
#                                       either way: builds or tests are slower, no more;
#                                       1 if cargo tree failed)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

names() {  # the packages `cargo tree` reaches with the given edge kinds, one per line
    cargo tree --quiet --workspace --locked --target all --prefix none -e "$1" \
        | grep -v ' feature ' | sed 's/ v[0-9].*//' | sort -u
}
# Reached over any edge, less those reached over normal and dev edges without entering a
# procedural macro; wasm-only crates (bumpalo, wasm-bindgen's macros) are never built here.
# (Into variables first: a failing `cargo tree` inside `<(...)` would go unnoticed.)
every=$(names all)
at_run_time=$(names normal,dev,no-proc-macro)
build_only=$(comm -23 <(echo "$every") <(echo "$at_run_time") | { grep -v -e '^bumpalo$' -e '^wasm-bindgen' || true; })

if [ "${1:-}" != --check ]; then
    echo "$build_only"
    exit 0
fi
named=$(sed -n '/^\[profile\.dev\.package\]$/,/^\[/p' Cargo.toml | sed -n 's/^\([A-Za-z0-9_-]*\) = { opt-level = 0 }$/\1/p' | sort -u)
missing=$(comm -23 <(echo "$build_only") <(echo "$named"))
# Named, but now also a run-time dependency: it runs unoptimised in the tests.
stale=$(comm -13 <(echo "$build_only") <(echo "$named"))
if [ -n "$missing" ]; then
    echo "note: build-time-only dependencies not named at opt-level 0 in Cargo.toml's [profile.dev.package] (they compile optimised, slower):" $missing
fi
if [ -n "$stale" ]; then
    echo "note: named at opt-level 0 in Cargo.toml's [profile.dev.package] but no longer build-time-only (they run unoptimised in the tests; remove them):" $stale
fi
if [ -z "$missing$stale" ]; then
    echo "Cargo.toml names every build-time-only dependency at opt-level 0, and nothing else"
fi
