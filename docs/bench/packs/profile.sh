#!/usr/bin/env bash
# A CPU profile of `membuf serve` under 64-stream ByteStream writes of
# fresh blobs for 8 s, with packs in a MinIO bucket (or, with "plain",
# without a shared tier); MinIO and the store on tmpfs, removed after.
# Writes OUT.pprof, OUT.txt (the bench's figures) and OUT.log.
#
#   profile.sh MEMBUF MINIO SIZE OUT [plain]
set -euo pipefail
bin=$1 minio=$2 size=$3 out=$4 mode=${5:-packs}
base=/dev/shm/membuf-packs-profile
export AWS_ACCESS_KEY_ID=membuf-test AWS_SECRET_ACCESS_KEY=membuf-test-secret AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/shm/membuf-packs-no-aws-config AWS_SHARED_CREDENTIALS_FILE=/dev/shm/membuf-packs-no-aws-credentials
rm -rf "$base"; mkdir -p "$base/minio/membuf" "$base/store"
MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off \
	"$minio" server "$base/minio" --address 127.0.0.1:19000 --console-address 127.0.0.1:19001 --quiet >/dev/null 2>&1 &
mpid=$!
for _ in $(seq 50); do curl -sf http://127.0.0.1:19000/minio/health/ready >/dev/null && break; sleep 0.2; done
up=(--upstream "s3://membuf/p?endpoint=http://127.0.0.1:19000&region=us-east-1&packs=true")
[ "$mode" = plain ] && up=()
"$bin" serve --listen 127.0.0.1:18990 --http 127.0.0.1:18991 --dir "$base/store" --scrub-rate 0 --pprof "${up[@]}" >"$out.log" 2>&1 &
spid=$!
for _ in $(seq 50); do curl -sf http://127.0.0.1:18991/healthz >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:18991/debug/pprof/profile?seconds=10" -o "$out.pprof" &
ppid=$!
"$bin" bench blobs --addr 127.0.0.1:18990 --server-pid $spid --mode write --size "$size" \
	--concurrency 64 --connections 4 --duration 8s --rounds 1 >"$out.txt" 2>&1
wait $ppid
kill $spid; wait $spid 2>/dev/null || true
kill $mpid; wait $mpid 2>/dev/null || true
rm -rf "$base"
