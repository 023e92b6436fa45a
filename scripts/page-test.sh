#!/usr/bin/env bash
# Slow check: the verification page of ts/aldb-verify in a real headless Chromium (Debian's
# `chromium`) against a live Hyades over `aldb simulate` output with signed root records. Builds
# the debug binaries and the page, then runs ts/aldb-verify/page/page-test.mjs, which prints one
# line per case and a final JSON line, and exits non-zero if a verdict is not the expected one.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/packages.sh
source scripts/lib/packages.sh

ensure_packages chromium:chromium nodejs:node npm:npm
cargo build -p aldb-cli -p hyades --locked
cd ts/aldb-verify
[ -d node_modules ] || npm ci
npm run build
npm run build:page
CHROMIUM="$(command -v chromium)" node page/page-test.mjs
