#!/usr/bin/env bash
# A cold node: node A writes a Bazel-like build through a
# shared tier in MinIO (membuf bench build's upload phase); node B, with an
# empty disk and 20 ms added to every request it sends the bucket (a
# delaying proxy), serves the rebuild (the download phase, --rebuild-addr).
# "objects" is the layout before packs (an object per entry), "packs" is
# packs=true with read-ahead; the two alternate, a new bucket prefix and new
# stores per run. MinIO and the stores on tmpfs.
#
#   run.sh MEMBUF MINIO ROUNDS OUT
set -euo pipefail
bin=$1 minio=$2 rounds=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
base=/dev/shm/membuf-coldnode
mkdir -p "$out"
export AWS_ACCESS_KEY_ID=membuf-test AWS_SECRET_ACCESS_KEY=membuf-test-secret AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/shm/membuf-coldnode-no-aws-config AWS_SHARED_CREDENTIALS_FILE=/dev/shm/membuf-coldnode-no-aws-credentials
rm -rf "$base"; mkdir -p "$base/minio/membuf"
MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off \
	"$minio" server "$base/minio" --address 127.0.0.1:19000 --console-address 127.0.0.1:19001 --quiet >/dev/null 2>&1 &
mpid=$!
python3 "$here/delayproxy.py" 19100 19000 0.020 &
ppid=$!
trap 'kill $mpid $ppid 2>/dev/null; wait 2>/dev/null; rm -rf "$base"' EXIT
for _ in $(seq 50); do curl -sf http://127.0.0.1:19000/minio/health/ready >/dev/null && break; sleep 0.2; done
serve() { # name endpoint-port query; sets pid
	local name=$1 port=$2 query=$3
	"$bin" serve --listen "127.0.0.1:0" --http "" --dir "$base/$name" --scrub-rate 0 --ready-file "$base/$name.ready" \
		--upstream "s3://membuf/$prefix?endpoint=http://127.0.0.1:$port&region=us-east-1$query" >"$out/$config-$r-$name.log" 2>&1 &
	pid=$!
}
addr() { # the gRPC address from a ready file's listen line
	for _ in $(seq 100); do [ -s "$base/$1.ready" ] && break; sleep 0.1; done
	grep -o 'grpc=[^ ]*' "$base/$1.ready" | cut -d= -f2
}
for r in $(seq "$rounds"); do
	for config in objects packs; do
		[ $((r % 2)) = 0 ] && config=$([ "$config" = objects ] && echo packs || echo objects)
		prefix=$config-$r
		query=""
		[ "$config" = packs ] && query="&packs=true"
		serve a 19000 "$query"; apid=$pid
		serve b 19100 "$query"; bpid=$pid
		"$bin" bench build --config none --addr "$(addr a)" --rebuild-addr "$(addr b)" --rebuild-pid "$bpid" \
			--rebuild-after 10s --actions 1000 --rounds 1 --concurrency 8 --json "$out/$config-$r.json" >"$out/$config-$r.txt" 2>&1
		kill "$apid" "$bpid"; wait "$apid" "$bpid" 2>/dev/null || true
		rm -rf "$base/a" "$base/b" "$base"/*.ready
		python3 - "$out/$config-$r.json" "$config" "$r" >>"$out/summary.txt" <<'PY'
import json, sys
path, config, r = sys.argv[1:]
res = [x for x in json.load(open(path))["results"] if x["mode"] == "download"][0]
cpu = (res.get("server") or {}).get("cpu_seconds", 0)
print(f"{config:8} round {r}: rebuild of {res['ops']} actions on the cold node in {res['wall_ns'] / 1e9:.2f} s; its CPU {cpu:.2f} s")
PY
	done
done
