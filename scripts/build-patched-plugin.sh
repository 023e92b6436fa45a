#!/usr/bin/env bash
# Builds libaldb_plugin.so with the cargo feature `patched-interface`, against the patched
# agave-geyser-plugin-interface that scripts/build-patched-validator.sh unpacked and patched
# (block metadata V0_0_5), so the plugin can ask for `"block_metadata_version": 5` and keep the
# vote-evidence log (docs/PLUGIN.md §9).
#
# The build happens in a copy of this checkout's files under the cache (default
# ~/.cache/aldb-agave/4.2.0-aldb/plugin; ALDB_AGAVE_PATCHED_ROOT moves the cache as it does for
# the validator), whose Cargo.toml gets a [patch.crates-io] entry for the interface. So this
# repository's Cargo.lock never changes; the copy's lock may differ from it only in that the
# interface becomes a path package, which is checked. Tracked and new (not ignored) files are
# copied as they are in the working tree; ALDB_PLUGIN_FROM_HEAD=1 copies the last commit instead.
#
#   scripts/build-patched-plugin.sh           # prints the .so path on its last line
#                                             # (aldb-config-check, aldb-votes-check beside it)
#   scripts/build-patched-plugin.sh --test    # also runs the plugin's tests and clippy with the feature
#
# Idempotent: the copy is synchronised (unchanged files keep their times) and cargo rebuilds only
# what changed, in a target directory of its own.
set -euo pipefail

version=4.2.0
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="${ALDB_AGAVE_PATCHED_ROOT:-$HOME/.cache/aldb-agave/$version-aldb}"
iface="$root/src/geyser-plugin-interface"
work="$root/plugin"
ws="$work/workspace"
stage="$work/stage"
export CARGO_TARGET_DIR="$work/target"

log() { echo "build-patched-plugin: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

run_tests=0
for arg in "$@"; do
  case "$arg" in
    --test) run_tests=1 ;;
    *) die "unknown argument $arg (only --test)" ;;
  esac
done

grep -q 'V0_0_5' "$iface/src/geyser_plugin_interface.rs" 2>/dev/null ||
  die "no patched interface at $iface: run scripts/build-patched-validator.sh first (ALDB_PATCHED_SKIP_BUILD=1 unpacks the sources only)"

# One run at a time: two would sync the same copy under each other.
mkdir -p "$work"
exec 9>"$work/.lock"
flock 9

# A fresh staging tree of the checkout's files, then a sync into the build copy that keeps the
# times of unchanged files and deletes files that are gone.
rm -rf "$stage"
mkdir -p "$stage" "$ws"
if [[ "${ALDB_PLUGIN_FROM_HEAD:-0}" == 1 ]]; then
  git -C "$repo" archive HEAD | tar -x -C "$stage"
else
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d "" f; do if [[ -f "$f" ]]; then printf "%s\0" "$f"; fi; done |
    tar --null -T - -cf -) | tar -xf - -C "$stage"
fi
python3 - "$stage" "$ws" <<'EOF'
import filecmp, os, shutil, sys
stage, ws = sys.argv[1], sys.argv[2]
want = set()
for top, _, files in os.walk(stage):
    for f in files:
        rel = os.path.relpath(os.path.join(top, f), stage)
        want.add(rel)
        s, t = os.path.join(stage, rel), os.path.join(ws, rel)
        if not os.path.exists(t) or not filecmp.cmp(s, t, shallow=False):
            os.makedirs(os.path.dirname(t), exist_ok=True)
            shutil.copyfile(s, t)  # a new time: cargo rebuilds what depends on it
            shutil.copymode(s, t)
for top, _, files in os.walk(ws):
    for f in files:
        rel = os.path.relpath(os.path.join(top, f), ws)
        if rel not in want:
            os.remove(os.path.join(ws, rel))
EOF
rm -rf "$stage"

cat >>"$ws/Cargo.toml" <<EOF

# Added by scripts/build-patched-plugin.sh: the patched interface (validator-patches/0002).
[patch.crates-io]
agave-geyser-plugin-interface = { path = "$iface" }
EOF
# cargo records the interface as a path package; nothing else may move.
(cd "$ws" && cargo metadata --format-version 1 >/dev/null)
python3 - "$repo/Cargo.lock" "$ws/Cargo.lock" <<'EOF' || die "the copy's lock drifted from the repository's"
import sys, tomllib
def pkgs(path):
    with open(path, "rb") as f:
        return {(p["name"], p["version"]): p.get("source") or "" for p in tomllib.load(f)["package"]}
ours, copy = pkgs(sys.argv[1]), pkgs(sys.argv[2])
diff = sorted(set(ours.items()) ^ set(copy.items()))
bad = [d for d in diff if d[0][0] != "agave-geyser-plugin-interface"]
if bad:
    print("packages that differ beyond the interface:", bad, file=sys.stderr)
    sys.exit(1)
EOF

log "building (target dir $CARGO_TARGET_DIR)"
(cd "$ws" && cargo build --release --locked -p aldb-plugin --features patched-interface --lib --bins) >&2
if [[ $run_tests == 1 ]]; then
  log "testing and linting with the feature"
  (cd "$ws" && cargo test --locked -p aldb-plugin --features patched-interface) >&2
  (cd "$ws" && cargo clippy --locked -p aldb-plugin --features patched-interface --all-targets -- -D warnings) >&2
fi
# Beside the library: its config check (which knows the feature's keys) and aldb-votes-check.
mkdir -p "$root/bin"
for f in libaldb_plugin.so aldb-config-check aldb-votes-check; do
  cp "$CARGO_TARGET_DIR/release/$f" "$root/bin/$f.part"
  mv "$root/bin/$f.part" "$root/bin/$f"
done
echo "$root/bin/libaldb_plugin.so"
