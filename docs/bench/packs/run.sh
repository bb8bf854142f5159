#!/usr/bin/env bash
# Packs' CPU: ByteStream writes of fresh blobs through
# `membuf serve` with the shared tier in a MinIO bucket, an object per
# entry ("objects") and in packs ("packs"), against the same server
# without one ("plain"); MinIO and the stores on tmpfs, a new store and
# bucket per run, the three interleaved. The CPU counted is the server's
# whole, from its start until its upload queue is empty after the writes
# (the front and every upload), per GiB written.
#
#   run.sh MEMBUF MINIO ROUNDS OUT
set -euo pipefail
bin=$1 minio=$2 rounds=$3 out=$4
base=/dev/shm/membuf-packs
mkdir -p "$out"
export AWS_ACCESS_KEY_ID=membuf-test AWS_SECRET_ACCESS_KEY=membuf-test-secret AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/shm/membuf-packs-no-aws-config AWS_SHARED_CREDENTIALS_FILE=/dev/shm/membuf-packs-no-aws-credentials
cpu() { awk '{print $14 + $15}' /proc/$1/stat; } # user + system, clock ticks
metric() { curl -sf http://127.0.0.1:18991/metrics | awk -v m="$1" '$1 == m {print $2}'; }
run() { # config size
	local config=$1 size=$2
	rm -rf "$base"; mkdir -p "$base/minio/membuf" "$base/store"
	MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off \
		"$minio" server "$base/minio" --address 127.0.0.1:19000 --console-address 127.0.0.1:19001 --quiet >/dev/null 2>&1 &
	local mpid=$!
	for _ in $(seq 50); do curl -sf http://127.0.0.1:19000/minio/health/ready >/dev/null && break; sleep 0.2; done
	local flags=(--listen 127.0.0.1:18990 --http 127.0.0.1:18991 --dir "$base/store" --scrub-rate 0)
	local url="s3://membuf/p?endpoint=http://127.0.0.1:19000&region=us-east-1"
	[ "$config" = objects ] && flags+=(--upstream "$url&packs=false")
	[ "$config" = packs ] && flags+=(--upstream "$url") # a bucket's layout by default
	"$bin" serve "${flags[@]}" >"$out/$config-$size-serve.log" 2>&1 &
	local spid=$!
	for _ in $(seq 50); do curl -sf http://127.0.0.1:18991/healthz >/dev/null && break; sleep 0.2; done
	local c0; c0=$(cpu $spid)
	"$bin" bench blobs --addr 127.0.0.1:18990 --server-pid $spid --mode write --size "$size" \
		--concurrency 64 --connections 4 --duration 3s --rounds 1 --json "$out/$config-$size-$r.json" >"$out/$config-$size-$r.txt" 2>&1
	if [ "$config" != plain ]; then # until every upload is done
		for _ in $(seq 3000); do [ "$(metric membuf_tier_upload_queue_length)" = 0 ] && break; sleep 0.1; done
	fi
	local c1; c1=$(cpu $spid)
	local puts; puts=$(curl -sf http://127.0.0.1:18991/metrics | awk '$1 ~ /^membuf_packs_objects_written_total/ {s += $2} END {print s + 0}')
	python3 - "$out/$config-$size-$r.json" "$c0" "$c1" "$(getconf CLK_TCK)" "$config" "$size" "$r" "$puts" >>"$out/summary.txt" <<'PY'
import json, sys
path, c0, c1, hz, config, size, r, puts = sys.argv[1:]
res = json.load(open(path))["results"][0]
gib = res["bytes"] / 2**30
cpu = (float(c1) - float(c0)) / float(hz)
print(f"{config:8} {size:6} round {r}: {res['ops']} blobs, {cpu:.2f} CPU-s over the writes and their uploads, {cpu / gib:.2f} CPU-s/GiB; pack and index objects written {puts}")
PY
	kill $spid 2>/dev/null || true; wait $spid 2>/dev/null || true
	kill $mpid 2>/dev/null || true; wait $mpid 2>/dev/null || true
}
for r in $(seq "$rounds"); do
	for size in 4KiB 64KiB; do
		for config in plain objects packs; do run $config $size; done
	done
done
rm -rf "$base"
