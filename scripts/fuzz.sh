#!/usr/bin/env bash
# Fuzzes every decoder that reads outside input, for a bounded time each, one target at a time:
#   proof_wire, proof_json      proofs (aldb-verify), wire and JSON forms
#   record_wire, record_json    root records and attestations (aldb-verify), binary and §9.5 JSON
#   record_log                  record-log segments through RecordLogReader (aldb-snapshot)
#   snapshot_file               snapshot files through Hyades::open and prove (aldb-snapshot)
#   rpc_params                  Hyades JSON-RPC request bodies through Rpc::handle
#   relayer_message             what the relayer reads from a record feed
#   relayer_config, plugin_config   the JSON5 config parsers
# The target bodies live in fuzz/src/ (the files in fuzz/fuzz_targets/ only call them).
#
#   scripts/fuzz.sh                  every target, FUZZ_SECONDS (default 60) seconds each
#   scripts/fuzz.sh record_log       only the named targets
#   FUZZ_SECONDS=600 scripts/fuzz.sh
#
# New interesting inputs accumulate in fuzz/corpus/<target> (not committed); the committed seeds
# in fuzz/seeds/<target> are real inputs (proofs, records, files an `aldb simulate` run wrote),
# so the fuzzer starts past the header checks. Builds keep debug assertions, so arithmetic
# overflow counts as a finding. A crash leaves its input in fuzz/artifacts/<target>; reproduce
# it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz -a <target> fuzz/artifacts/<target>/<file>
# and once fixed, copy the input to fuzz/regressions/<target>/: each crate's fuzz_regressions
# test replays the seeds and regressions of its targets in the normal `cargo test`. An input
# that runs over 30 s counts as a hang.
set -euo pipefail

cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-60}"
if [[ $# -gt 0 ]]; then
    targets=("$@")
else
    targets=(proof_wire proof_json record_wire record_json record_log snapshot_file rpc_params relayer_message
        relayer_config plugin_config vote_transaction)
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
    if ! cargo fuzz run --fuzz-dir fuzz --debug-assertions "$target" "$corpus" "$seeds" -- \
        -max_total_time="$seconds" -timeout=30 -print_final_stats=1; then
        failed+=("$target")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzzing found failures in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzzing passed: ${targets[*]}, ${seconds}s each" >&2
