#!/usr/bin/env bash
# ByteStream writes of fresh blobs through `membuf serve --s3` against a
# MinIO bucket, both on tmpfs, for two membuf binaries and without --s3,
# interleaved: issue 30's measure of what the S3 tier costs the write path.
# Each run gets a new store and a new bucket. The server's CPU comes from
# --server-pid (its own CPU-s per GiB within the measured window, uploads
# to the bucket included).
#
#   run.sh OLD_MEMBUF NEW_MEMBUF MINIO ROUNDS OUT
set -euo pipefail
old=$1 new=$2 minio=$3 rounds=$4 out=$5
base=/dev/shm/membuf-s3write
mkdir -p "$out"
export AWS_ACCESS_KEY_ID=membuf-test AWS_SECRET_ACCESS_KEY=membuf-test-secret AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/shm/membuf-s3write-no-aws-config AWS_SHARED_CREDENTIALS_FILE=/dev/shm/membuf-s3write-no-aws-credentials
run() { # name binary s3? size
	local name=$1 bin=$2 s3=$3 size=$4
	rm -rf "$base"; mkdir -p "$base/minio/membuf" "$base/store"
	MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off \
		"$minio" server "$base/minio" --address 127.0.0.1:19000 --console-address 127.0.0.1:19001 --quiet >/dev/null 2>&1 &
	local mpid=$!
	for _ in $(seq 50); do curl -sf http://127.0.0.1:19000/minio/health/ready >/dev/null && break; sleep 0.2; done
	local flags=(--listen 127.0.0.1:18990 --http 127.0.0.1:18991 --dir "$base/store" --scrub-rate 0)
	[ "$s3" = yes ] && flags+=(--s3 "s3://membuf/p?endpoint=http://127.0.0.1:19000&region=us-east-1")
	"$bin" serve "${flags[@]}" >"$out/$name-$size-serve.log" 2>&1 &
	local spid=$!
	for _ in $(seq 50); do curl -sf http://127.0.0.1:18991/healthz >/dev/null && break; sleep 0.2; done
	"$new" bench blobs --addr 127.0.0.1:18990 --server-pid $spid --mode write --size "$size" \
		--concurrency 64 --connections 4 --duration 8s --rounds 1 >>"$out/$name-$size.txt" 2>&1
	kill $spid 2>/dev/null || true; wait $spid 2>/dev/null || true
	kill $mpid 2>/dev/null || true; wait $mpid 2>/dev/null || true
}
for r in $(seq "$rounds"); do
	for size in 4KiB 64KiB; do
		run old "$old" yes $size
		run new "$new" yes $size
		run new-no-s3 "$new" no $size
	done
done
rm -rf "$base"
