#!/usr/bin/env bash
# Builds solana-test-validator from agave-validator 4.2.0 (crates.io, --locked) with the same
# rustc as the plugin, and caches it outside the repository so later runs reuse it.
# The plugin ABI is a Rust trait object, so the validator and the plugin must come from the same
# compiler and the same agave crate versions. About 40 CPU-minutes on a 2-core machine.
set -euo pipefail
root="${ALDB_AGAVE_ROOT:-$HOME/.cache/aldb-agave/4.2.0}"
bin="$root/bin/solana-test-validator"
if [[ -x "$bin" ]] && "$bin" --version | grep -q '^solana-test-validator 4.2.0'; then
  echo "$bin"
  exit 0
fi
if command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq clang libclang-dev libudev-dev protobuf-compiler pkg-config libssl-dev >/dev/null
fi
cargo install agave-validator --version 4.2.0 --locked --root "$root" --bin solana-test-validator >&2
echo "$bin"
