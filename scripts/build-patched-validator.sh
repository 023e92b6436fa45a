#!/usr/bin/env bash
# Builds solana-test-validator and agave-validator 4.2.0 with the series in validator-patches/
# applied, cached outside the repository (default ~/.cache/aldb-agave/4.2.0-aldb).
#
# The exact published crate sources are downloaded by cargo itself, from whatever registry it is
# configured for (a throwaway package depending on them, `cargo fetch`, then the .crate files in
# cargo's own cache), checked against the checksums of the agave-validator 4.2.0 Cargo.lock, which
# the published crate ships, and unpacked under src/ in the agave monorepo's layout
# (runtime/, ledger/, feature-set/, ...) so the patches apply with `patch -p1` here and on an agave
# tree alike, and built as one cargo workspace with [patch.crates-io] entries pointing at the
# unpacked crates, the shipped lock file and one target directory. Versions never drift: the lock
# is the shipped one plus the packages aldb-bank brings, and the script refuses any other change.
#
# Idempotent: a stamp holds the hash of the series and of this script; when it differs the sources
# are unpacked again and the series reapplied, otherwise cargo rebuilds only what changed.
# Installs the system packages the build needs when one is missing (scripts/lib/packages.sh).
# Prints the bin directory on its last line. ALDB_PATCHED_SKIP_BUILD=1 stops after the sources.
set -euo pipefail

version=4.2.0
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib/packages.sh
source "$repo/scripts/lib/packages.sh"
root="${ALDB_AGAVE_PATCHED_ROOT:-$HOME/.cache/aldb-agave/$version-aldb}"
crates="$root/crates"
src="$root/src"
bin="$root/bin"
export CARGO_TARGET_DIR="$root/target"

# The published agave-validator crate is the one file whose checksum the lock cannot give.
validator_sha256=8b44de1faf844bb32f719b1a6baf055454bda1ffecd68db4bd2614e4ab7bd511

# crate name -> directory in the agave monorepo. Every crate here is built from its unpacked source
# (so a patch to it only needs a line in the series); the rest come from the registry as usual.
declare -A dirs=(
  [agave-feature-set]=feature-set
  [solana-runtime]=runtime
  [agave-geyser-plugin-interface]=geyser-plugin-interface
  [solana-geyser-plugin-manager]=geyser-plugin-manager
  [solana-ledger]=ledger
  [solana-core]=core
  [solana-rpc]=rpc
  [solana-test-validator]=test-validator
)

log() { echo "build-patched-validator: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

ensure_packages "${agave_build_packages[@]}" || die "the build needs these system packages"

# from_cargo_cache NAME SHA256: copies NAME-$version.crate into crates/ from cargo's download cache
# (one directory per registry it has used), the copy whose checksum is SHA256; 1 if it has none.
from_cargo_cache() {
  local f
  for f in "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"$1-$version.crate"; do
    if [[ -f "$f" ]] && echo "$2  $f" | sha256sum -c --quiet - >/dev/null 2>&1; then
      cp "$f" "$crates/$1-$version.crate.part"
      mv "$crates/$1-$version.crate.part" "$crates/$1-$version.crate"
      return 0
    fi
  done
  return 1
}

# cargo_fetch LOCK NAME...: cargo downloads NAME@=$version (each) into its cache, through the
# registry it is configured for: a throwaway package depends on them and `cargo fetch` gets its
# dependency tree for this host, resolved from a copy of LOCK (cargo keeps the versions LOCK
# names and resolves only what it lacks).
cargo_fetch() {
  local lock=$1 dir="$root/fetch" name
  shift
  rm -rf "$dir"
  mkdir -p "$dir/src"
  : >"$dir/src/lib.rs"
  cat >"$dir/Cargo.toml" <<EOF
[package]
name = "aldb-agave-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "src/lib.rs"

[workspace]

[dependencies]
EOF
  for name in "$@"; do echo "$name = \"=$version\"" >>"$dir/Cargo.toml"; done
  cp "$lock" "$dir/Cargo.lock"
  log "cargo fetch: $*"
  (cd "$dir" && cargo fetch --quiet --target "$(rustc -vV | sed -n 's/^host: //p')") >&2
  rm -rf "$dir"
}

# have NAME SHA256: crates/NAME-$version.crate, checked against SHA256 (taken from cargo's cache
# when crates/ lacks it); 1 when neither has it.
have() {
  local file="$crates/$1-$version.crate"
  if [[ ! -f "$file" ]]; then
    from_cargo_cache "$1" "$2" || return 1
  fi
  echo "$2  $file" | sha256sum -c --quiet - >/dev/null 2>&1 || {
    rm -f "$file"
    die "$1-$version.crate does not match its checksum $2"
  }
}

# lock_checksum NAME: the registry checksum of NAME in the shipped lock (exactly one version).
lock_checksum() {
  awk -v n="$1" '
    $0 == "[[package]]" { name = ""; ver = ""; sum = "" }
    $1 == "name" { gsub(/"/, "", $3); name = $3 }
    $1 == "checksum" && name == n { gsub(/"/, "", $3); print $3 }
  ' "$crates/agave-validator.Cargo.lock"
}

mkdir -p "$crates" "$bin"
# agave-validator carries the lock everything else is pinned to, so cargo must resolve it without
# that lock: from this repository's lock, whose packages shared with agave already have agave's
# versions (docs/PLUGIN.md). Of the ~930 packages it downloads, ~200 are at versions the build does
# not use (~400 from a fresh resolution); the patched crates are among the rest, at =4.2.0.
if ! have agave-validator "$validator_sha256"; then
  cargo_fetch "$repo/Cargo.lock" agave-validator
  have agave-validator "$validator_sha256" ||
    die "cargo fetched no agave-validator-$version.crate with checksum $validator_sha256"
fi
tar -xzOf "$crates/agave-validator-$version.crate" "agave-validator-$version/Cargo.lock" \
  >"$crates/agave-validator.Cargo.lock"

patches=("$repo"/validator-patches/*.patch)
[[ -e "${patches[0]}" ]] || patches=()
stamp=$( (
  cat "${BASH_SOURCE[0]}"
  for p in "${patches[@]}"; do
    basename "$p"
    cat "$p"
  done
) | sha256sum | cut -d' ' -f1)

if [[ "$(cat "$src/.aldb-series" 2>/dev/null || true)" != "$stamp" ]]; then
  log "unpacking agave $version and applying ${#patches[@]} patches"
  # Unpack and patch in a staging tree, then copy over only the files whose content differs, so
  # untouched files keep their times and cargo rebuilds only the crates a changed patch touches.
  stage="$root/stage"
  rm -rf "$stage"
  mkdir -p "$stage" "$src"
  rm -f "$src/.aldb-series"
  unpack() { mkdir -p "$stage/$3" && tar -xzf "$crates/$1-$2.crate" -C "$stage/$3" --strip-components=1; }
  unpack agave-validator "$version" validator
  declare -A sums=()
  missing=()
  for name in "${!dirs[@]}"; do
    sums[$name]=$(lock_checksum "$name")
    [[ $(wc -w <<<"${sums[$name]}") == 1 ]] || die "$name: expected one checksum in the lock, found '${sums[$name]}'"
    have "$name" "${sums[$name]}" || missing+=("$name")
  done
  if ((${#missing[@]})); then
    # Resolved from the shipped lock: the crates and their dependencies at the versions the build
    # uses, so everything this downloads is needed below.
    cargo_fetch "$crates/agave-validator.Cargo.lock" "${missing[@]}"
  fi
  for name in "${!dirs[@]}"; do
    have "$name" "${sums[$name]}" || die "cargo fetched no $name-$version.crate with checksum ${sums[$name]}"
    unpack "$name" "$version" "${dirs[$name]}"
  done
  for p in "${patches[@]}"; do
    log "applying $(basename "$p")"
    (cd "$stage" && patch -p1 --forward --batch --no-backup-if-mismatch <"$p") >&2 ||
      die "$(basename "$p") does not apply to the agave $version sources"
  done
  python3 - "$stage" "$src" validator "${dirs[@]}" <<'EOF'
import filecmp, os, shutil, sys
stage, src, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
changed = 0
for d in dirs:
    a, b = os.path.join(stage, d), os.path.join(src, d)
    want = set()
    for top, _, files in os.walk(a):
        for f in files:
            rel = os.path.relpath(os.path.join(top, f), a)
            want.add(rel)
            s, t = os.path.join(a, rel), os.path.join(b, rel)
            if not os.path.exists(t):
                os.makedirs(os.path.dirname(t), exist_ok=True)
                shutil.copy2(s, t)  # a first unpack keeps the archive's times
                changed += 1
            elif not filecmp.cmp(s, t, shallow=False):
                shutil.copyfile(s, t)  # a new time: cargo must rebuild this crate
                changed += 1
    for top, _, files in os.walk(b):
        for f in files:
            rel = os.path.relpath(os.path.join(top, f), b)
            if rel not in want:
                os.remove(os.path.join(b, rel))
                changed += 1
print(f"build-patched-validator: {changed} source files changed", file=sys.stderr)
EOF
  rm -rf "$stage"
  # A new series starts again from the shipped lock.
  cp "$crates/agave-validator.Cargo.lock" "$src/Cargo.lock"
  echo "$stamp" >"$src/.aldb-series"
fi

# The block-metadata probe plugin (validator-patches/probe), built with the same compiler and
# crates as the validator so it can receive V0_0_5.
mkdir -p "$src/probe/src"
cmp -s "$repo/validator-patches/probe/lib.rs" "$src/probe/src/lib.rs" ||
  cp "$repo/validator-patches/probe/lib.rs" "$src/probe/src/lib.rs"
cat >"$src/probe/Cargo.toml.new" <<EOF
[package]
name = "aldb-block-metadata-probe"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]
path = "src/lib.rs"

[dependencies]
agave-geyser-plugin-interface = "=$version"
EOF
cmp -s "$src/probe/Cargo.toml.new" "$src/probe/Cargo.toml" || cp "$src/probe/Cargo.toml.new" "$src/probe/Cargo.toml"
rm -f "$src/probe/Cargo.toml.new"

# The ledger replay tool (validator-patches/replay): agave-ledger-tool 4.2.0 is not published,
# so this replays a ledger from genesis in a second process on the same patched crates. Only
# features the validator already enables, so sharing the build changes none of its crates.
mkdir -p "$src/replay/src"
cmp -s "$repo/validator-patches/replay/main.rs" "$src/replay/src/main.rs" ||
  cp "$repo/validator-patches/replay/main.rs" "$src/replay/src/main.rs"
cat >"$src/replay/Cargo.toml.new" <<EOF
[package]
name = "aldb-ledger-replay"
version = "0.1.0"
edition = "2024"
publish = false

[[bin]]
name = "aldb-ledger-replay"
path = "src/main.rs"

[dependencies]
agave-logger = { version = "=$version", features = ["agave-unstable-api"] }
solana-accounts-db = { version = "=$version", features = ["agave-unstable-api"] }
solana-genesis-utils = { version = "=$version", features = ["agave-unstable-api"] }
solana-ledger = { version = "=$version", features = ["agave-unstable-api"] }
solana-runtime = { version = "=$version", features = ["agave-unstable-api"] }
solana-shred-version = "3.0.1"
EOF
cmp -s "$src/replay/Cargo.toml.new" "$src/replay/Cargo.toml" || cp "$src/replay/Cargo.toml.new" "$src/replay/Cargo.toml"
rm -f "$src/replay/Cargo.toml.new"

# Every run: aldb-bank and the aldb crates it links are built from this checkout, so a new
# dependency of theirs enters the lock here (and only packages that were not in it may enter).
{
  echo "# Generated by scripts/build-patched-validator.sh; rewritten on every run."
  echo "[workspace]"
  echo "resolver = \"2\""
  echo "members = [\"validator\", \"probe\", \"replay\"]"
  printf 'exclude = ['
  for name in "${!dirs[@]}"; do printf '"%s", ' "${dirs[$name]}"; done
  echo "]"
  echo
  echo "[patch.crates-io]"
  for name in "${!dirs[@]}"; do echo "$name = { path = \"${dirs[$name]}\" }"; done
  echo "aldb-bank = { path = \"$repo/aldb-bank\" }"
} >"$src/Cargo.toml"
# cargo records the patched crates as path packages and adds what aldb-bank needs; the check
# below refuses any other difference from the shipped lock.
(cd "$src" && cargo metadata --format-version 1 >/dev/null)
python3 - "$crates/agave-validator.Cargo.lock" "$src/Cargo.lock" <<'EOF' || die "the lock drifted from agave-validator $version's"
import sys, tomllib
def pkgs(path):
    with open(path, "rb") as f:
        return {(p["name"], p["version"]): p.get("source") for p in tomllib.load(f)["package"]}
shipped, ours = pkgs(sys.argv[1]), pkgs(sys.argv[2])
bad = [k for k in shipped if k not in ours and k[0] != "agave-validator"]
if bad:
    print("packages of the shipped lock missing or at other versions:", bad, file=sys.stderr)
    sys.exit(1)
added = sorted(f"{n} {v}" for (n, v) in ours if (n, v) not in shipped)
print("build-patched-validator: packages added to the lock:", ", ".join(added) or "none", file=sys.stderr)
EOF
[[ "${ALDB_PATCHED_SKIP_BUILD:-0}" == 1 ]] && exit 0

log "building (target dir $CARGO_TARGET_DIR)"
# `--lib` as well: with only `--bin` filters cargo builds no library target, so the probe's cdylib
# would be skipped.
(cd "$src" && cargo build --release --locked -p agave-validator --bin solana-test-validator \
  --bin agave-validator -p aldb-block-metadata-probe --lib -p aldb-ledger-replay --bin aldb-ledger-replay) >&2
for b in solana-test-validator agave-validator libaldb_block_metadata_probe.so aldb-ledger-replay; do
  cp "$CARGO_TARGET_DIR/release/$b" "$bin/$b.part"
  mv "$bin/$b.part" "$bin/$b"
done
echo "$bin"
