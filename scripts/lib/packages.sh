# shellcheck shell=bash
# System packages the scripts install for themselves, so a fresh machine's run does not stop half
# way (an agave build without libclang fails at clang-sys after twenty minutes). Functions and a
# list only; sourcing it installs nothing.

# The system packages an agave build needs (Debian names): clang and libclang for the bindgen of
# rocksdb, libudev for the hardware-wallet crates, protoc for the protobuf crates, and pkg-config
# with the OpenSSL headers.
# shellcheck disable=SC2034 # read by the scripts that source this
agave_build_packages=(clang:clang libclang-dev libudev-dev protobuf-compiler:protoc pkg-config:pkg-config
  libssl-dev)

# ensure_packages PKG[:COMMAND]...: installs with apt-get (through sudo when not root) the Debian
# packages that are missing, after one `apt-get update`, and nothing when none is. PKG:COMMAND
# counts as present when COMMAND is on the PATH, however it was installed; a bare PKG (a library)
# when dpkg lists it installed. Without apt-get it names what is missing and returns 1; without
# dpkg a bare PKG cannot be checked and is only named.
ensure_packages() {
  local spec pkg cmd missing=() unchecked=()
  for spec in "$@"; do
    pkg="${spec%%:*}"
    cmd="${spec#*:}"
    if [[ "$cmd" != "$spec" ]]; then
      command -v "$cmd" >/dev/null 2>&1 && continue
    elif ! command -v dpkg-query >/dev/null 2>&1; then
      unchecked+=("$pkg")
      continue
    elif [[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" == installed ]]; then
      continue
    fi
    missing+=("$pkg")
  done
  if ((${#unchecked[@]})); then
    echo "not checked (no dpkg), needed: ${unchecked[*]} (Debian names)" >&2
  fi
  ((${#missing[@]})) || return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing system packages (Debian names): ${missing[*]}; install them and run again" >&2
    return 1
  fi
  local sudo=()
  ((EUID == 0)) || sudo=(sudo)
  echo "installing system packages: ${missing[*]}" >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
