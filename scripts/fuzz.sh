#!/usr/bin/env bash
# Fuzzes the proof decoders of aldb-verify (the wire and JSON forms) for a bounded time each.
#
#   scripts/fuzz.sh                  every target, FUZZ_SECONDS (default 60) seconds each
#   scripts/fuzz.sh proof_wire       only the named targets
#   FUZZ_SECONDS=600 scripts/fuzz.sh
#
# New interesting inputs accumulate in fuzz/corpus/<target> (not committed); the committed seeds
# in fuzz/seeds/<target> are real proofs, so the fuzzer starts past the header checks. A crash
# leaves its input in fuzz/artifacts/<target>; reproduce it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run <target> fuzz/artifacts/<target>/<file>
# and turn it into a unit test in aldb-verify once fixed.
set -euo pipefail

cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-60}"
if [[ $# -gt 0 ]]; then
    targets=("$@")
else
    targets=(proof_wire proof_json)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz not found; installing it" >&2
    cargo install cargo-fuzz --locked
fi

# cargo-fuzz builds with nightly-only compiler flags (-Zsanitizer=address and the sanitizer
# coverage options). Only a stable toolchain is installed here; RUSTC_BOOTSTRAP=1 makes stable
# rustc accept unstable flags. That is fine for a local test tool, never for shipped builds.
export RUSTC_BOOTSTRAP=1

failed=()
for target in "${targets[@]}"; do
    corpus="fuzz/corpus/$target"
    seeds="fuzz/seeds/$target"
    mkdir -p "$corpus"
    echo "== fuzzing $target for ${seconds}s" >&2
    # The first directory receives new inputs; the seeds are only read.
    if ! cargo fuzz run --fuzz-dir fuzz "$target" "$corpus" "$seeds" -- \
        -max_total_time="$seconds" -print_final_stats=1; then
        failed+=("$target")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzzing found failures in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzzing passed: ${targets[*]}, ${seconds}s each" >&2
