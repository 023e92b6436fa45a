#!/usr/bin/env bash
# Builds solana-test-validator from the published agave-validator 4.2.0 (--locked) with the same
# rustc as the plugin, and caches it outside the repository so later runs reuse it.
# The plugin ABI is a Rust trait object, so the validator and the plugin must come from the same
# compiler and the same agave crate versions. About 40 CPU-minutes on a 2-core machine.
set -euo pipefail
# shellcheck source=scripts/lib/packages.sh
source "$(dirname "$0")/lib/packages.sh"
root="${ALDB_AGAVE_ROOT:-$HOME/.cache/aldb-agave/4.2.0}"
bin="$root/bin/solana-test-validator"
if [[ -x "$bin" ]] && "$bin" --version | grep -q '^solana-test-validator 4.2.0'; then
  echo "$bin"
  exit 0
fi
ensure_packages "${agave_build_packages[@]}"
cargo install agave-validator --version 4.2.0 --locked --root "$root" --bin solana-test-validator >&2
echo "$bin"
