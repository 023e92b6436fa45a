#!/usr/bin/env python3
"""Check that our Cargo.lock resolves every crate shared with agave-validator to agave's version.

Why: the geyser plugin ABI is a Rust trait object (`*mut dyn GeyserPlugin`), and the values
crossing it (`ReplicaAccountInfoVersions`, `SlotStatus`, `GeyserPluginError`, `log::Log`, ...)
are plain Rust types with no stable layout. The validator and the plugin agree on them only if
both are built by the same rustc from the same source of every crate those types come from. So
every package that appears in both lock files (`log`, `solana-*`, `agave-*`, `thiserror`, ...)
must have the same version here as in the lock file `agave-validator` was built with; a newer
patch release can change a layout or a vtable without changing any name, and nothing would
notice until the validator crashed.

Usage:
    scripts/check-agave-lock.py AGAVE_CARGO_LOCK [--ours Cargo.lock] [--only FILE]

AGAVE_CARGO_LOCK is `agave-validator-<version>/Cargo.lock` from the unpacked crate (after
`cargo fetch` it is in cargo's registry source directory), or the lock file of an agave
checkout. `--only FILE` restricts the check to the package names listed in FILE (one per
line, or `cargo tree --prefix none` output, whose `name vX.Y.Z (...)` lines select that version
only), for example the plugin's dependency tree:

    cargo tree -p aldb-plugin --prefix none --edges normal,build > /tmp/tree.txt
    scripts/check-agave-lock.py "$AGAVE_LOCK" --only /tmp/tree.txt

With `--commands` it prints, instead of the listing, the `cargo update -p NAME@OURS --precise
AGAVE` command that pins each difference. A pin can fail while another package still needs the
newer version; pinning the rest first (often a `solana-*` crate that pulled it in) and running
the commands again converges.

A package name may occur in a lock file more than once (semver-incompatible versions side by
side, such as `thiserror` 1.x and 2.x), and cargo treats those as unrelated crates. So versions
are compared per semver-compatible line (`1.x`, `0.9.x`, `0.0.3`): a version of ours differs
when agave resolves the same line to another version. A line agave does not have at all (we use
`rand` 0.9, agave only 0.8) shares no type with the validator; it is listed as a note, and as a
difference only with `--strict`. Exit status: 0 when nothing differs, 1 when something does
(each difference is listed), 2 on a usage or parse error.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path


def read_lock(path: Path) -> dict[str, set[str]]:
    """Package name -> set of versions, from a Cargo.lock (any lock-file version)."""
    versions: dict[str, set[str]] = defaultdict(set)
    name = None
    in_package = False
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("["):
            in_package = line == "[[package]]"
            name = None
            continue
        if not in_package:
            continue
        m = re.fullmatch(r'(name|version) = "([^"]+)"', line)
        if not m:
            continue
        if m.group(1) == "name":
            name = m.group(2)
        elif name is not None:
            versions[name].add(m.group(2))
    if not versions:
        raise ValueError(f"{path}: no [[package]] entries found")
    return dict(versions)


def compat(version: str) -> str:
    """The semver-compatible line of a version: `1.2.3` -> `1`, `0.9.4` -> `0.9`, `0.0.3` -> `0.0.3`."""
    core = re.split(r"[-+]", version, maxsplit=1)[0].split(".")
    if core[0] != "0":
        return core[0]
    if len(core) > 1 and core[1] != "0":
        return ".".join(core[:2])
    return ".".join(core[:3])


def read_only(path: Path) -> dict[str, set[str] | None]:
    """Packages to check, one per line: `name` (every version of it) or `cargo tree --prefix
    none` output, `name vX.Y.Z (...)` (that version only)."""
    only: dict[str, set[str] | None] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        words = raw.split()
        if not words or words[0].startswith("["):
            continue
        name = words[0]
        if len(words) > 1 and re.fullmatch(r"v\d+\.\d+\.\d+\S*", words[1]):
            if name not in only:
                only[name] = set()
            versions = only[name]
            if versions is not None:
                versions.add(words[1][1:])
        else:
            only[name] = None
    return only


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("agave_lock", type=Path, help="agave-validator's Cargo.lock")
    ap.add_argument("--ours", type=Path, default=Path("Cargo.lock"), help="our Cargo.lock (default: ./Cargo.lock)")
    ap.add_argument("--only", type=Path, help="check only the package names listed in this file")
    ap.add_argument(
        "--commands",
        action="store_true",
        help="print the `cargo update -p NAME@OURS --precise AGAVE` command for each difference instead",
    )
    ap.add_argument("--strict", action="store_true", help="also fail on versions whose semver line agave lacks")
    args = ap.parse_args()
    try:
        ours = read_lock(args.ours)
        theirs = read_lock(args.agave_lock)
        only = read_only(args.only) if args.only else None
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    shared = sorted(set(ours) & set(theirs))
    if only is not None:
        shared = [n for n in shared if n in only]
    differing = []
    unshared = []
    for name in shared:
        lines = defaultdict(set)
        for v in theirs[name]:
            lines[compat(v)].add(v)
        mine = ours[name]
        if only is not None and only.get(name) is not None:
            mine = mine & only[name]
        for v in sorted(mine - theirs[name]):
            want = sorted(lines.get(compat(v), ()))
            if want:
                if args.commands:
                    differing.append(f"cargo update -p {name}@{v} --precise {want[-1]}")
                else:
                    differing.append(f"{name}: ours {v}; agave {', '.join(want)}")
            elif args.strict:
                differing.append(f"{name}: ours {v}; agave {', '.join(sorted(theirs[name]))} (other semver lines)")
            else:
                unshared.append(f"{name} {v} (agave: {', '.join(sorted(theirs[name]))})")

    for line in differing:
        print(line)
    for line in unshared:
        print(f"note: not shared, agave has no semver-compatible version: {line}", file=sys.stderr)
    scope = "in the listed packages" if only is not None else "in both lock files"
    if differing:
        print(f"{len(differing)} of {len(shared)} shared packages {scope} differ from agave's lock", file=sys.stderr)
        return 1
    print(f"all {len(shared)} shared packages {scope} match agave's lock", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
