#!/usr/bin/env bash
# Issue 30's front and uploads apart: `membuf serve` with --s3 (MinIO on
# tmpfs) and without, interleaved, a new store and bucket each run.
#
# With --s3 the bucket is reached through holdput.go, a proxy that holds
# every PUT during the measured window: the upload workers stand still,
# so the window's server CPU is the front's (receive, store, journal,
# queue; FindMissingBlobs' HEADs and GetActionResult's GETs pass). After
# the window, with the clients stopped, the proxy lets the PUTs go and the
# queue drains: the server's CPU over the drain (from /proc/PID/stat),
# over the uploads it made and their bytes (its /metrics), is the
# uploads' own cost, in uploads.txt: over the first 30 s of the drain, or
# until the queue is empty if sooner (a steady rate, whatever is left).
# Workloads, each for 6 s at 64 streams over 4 connections (bench blobs):
# ByteStream writes of 4 KiB and of 64 KiB blobs, and BatchUpdateBlobs of
# 16 blobs of 4 KiB a request (batch-write).
#
#   front.sh MEMBUF MINIO ROUNDS OUT [PROFILE [BASELINE]]
#
# PROFILE=yes also takes a CPU profile of the first round's windows and
# drains (OUT/*.pprof). BASELINE, another membuf binary, adds runs of it
# with --s3 (named s3base-*), interleaved with the others.
set -euo pipefail
client=$1 bin=$1 minio=$2 rounds=$3 out=$4 profile=${5:-no} baseline=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
base=/dev/shm/membuf-s3front
mkdir -p "$out"
go build -o "$out/holdput" "$here/holdput.go"
export AWS_ACCESS_KEY_ID=membuf-test AWS_SECRET_ACCESS_KEY=membuf-test-secret AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=$base-no-aws-config AWS_SHARED_CREDENTIALS_FILE=$base-no-aws-credentials
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
metric() { # name-with-labels
	curl -sf http://127.0.0.1:18991/metrics | awk -v m="$1" '$1 == m {print $2}'
}
run() { # s3|s3base|no-s3 workload size round
	local config=$1 workload=$2 size=$3 round=$4 name s3=yes bin=$bin
	name=$config-$workload-$size
	[ "$config" = no-s3 ] && s3=no
	[ "$config" = s3base ] && bin=$baseline
	rm -rf "$base"; mkdir -p "$base/minio/membuf" "$base/store"
	local flags=(--listen 127.0.0.1:18990 --http 127.0.0.1:18991 --dir "$base/store" --scrub-rate 0 --pprof)
	local mpid= hpid=
	if [ "$s3" = yes ]; then
		MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off \
			"$minio" server "$base/minio" --address 127.0.0.1:19000 --console-address 127.0.0.1:19001 --quiet >/dev/null 2>&1 &
		mpid=$!
		"$out/holdput" -listen 127.0.0.1:19002 -to http://127.0.0.1:19000 -control 127.0.0.1:19003 2>>"$out/holdput.log" &
		hpid=$!
		for _ in $(seq 50); do curl -sf http://127.0.0.1:19000/minio/health/ready >/dev/null && break; sleep 0.2; done
		flags+=(--s3 "s3://membuf/p?endpoint=http://127.0.0.1:19002&region=us-east-1" --s3-timeout 5m)
	fi
	"$bin" serve "${flags[@]}" >"$out/$name-serve.log" 2>&1 &
	local spid=$!
	for _ in $(seq 50); do curl -sf http://127.0.0.1:18991/healthz >/dev/null && break; sleep 0.2; done
	local prof=
	if [ "$profile" = yes ] && [ "$round" = 1 ]; then
		curl -sf -o "$out/$name-front.pprof" "http://127.0.0.1:18991/debug/pprof/profile?seconds=5" &
		prof=$!
	fi
	"$client" bench blobs --addr 127.0.0.1:18990 --server-pid $spid --mode "$workload" --size "$size" \
		--concurrency 64 --connections 4 --duration 6s --rounds 1 >>"$out/$name.txt" 2>&1
	[ -n "$prof" ] && wait $prof
	if [ "$s3" = yes ]; then
		# The clients are stopped: whatever the server spends from here on
		# is the uploads'.
		local t0 n0 b0 s0 t1 n1 b1 s1 pending
		t0=$(cpu_ticks $spid); s0=$(date +%s.%N)
		n0=$(metric 'membuf_tier_uploads_total{outcome="ok"}'); b0=$(metric 'membuf_tier_bytes_total{direction="up"}')
		pending=$(metric membuf_tier_upload_queue_length)
		if [ "$profile" = yes ] && [ "$round" = 1 ]; then
			curl -sf -o "$out/$name-drain.pprof" "http://127.0.0.1:18991/debug/pprof/profile?seconds=20" &
			prof=$!
		fi
		curl -sf -X POST http://127.0.0.1:19003/release
		for _ in $(seq 60); do
			[ "$(metric membuf_tier_upload_queue_length)" = 0 ] && break
			sleep 0.5
		done
		t1=$(cpu_ticks $spid); s1=$(date +%s.%N)
		n1=$(metric 'membuf_tier_uploads_total{outcome="ok"}'); b1=$(metric 'membuf_tier_bytes_total{direction="up"}')
		[ -n "$prof" ] && wait $prof
		local hz; hz=$(getconf CLK_TCK)
		awk -v name="$name" -v r="$round" -v p="$pending" -v t0="$t0" -v t1="$t1" -v hz="$hz" -v n0="$n0" -v n1="$n1" \
			-v b0="$b0" -v b1="$b1" -v s0="$s0" -v s1="$s1" -v left="$(metric membuf_tier_upload_queue_length)" 'BEGIN {
			cpu = (t1 - t0) / hz; n = n1 - n0; b = b1 - b0
			printf "%-22s round %s  queued %6d  uploaded %6d  left %s  %.1f s  %.1f uploads/s  CPU %.2f s  %.1f µs/upload  %.2f CPU-s/GiB\n",
				name, r, p, n, left, s1 - s0, n / (s1 - s0), cpu, cpu / n * 1e6, cpu / (b / 2^30)
		}' >>"$out/uploads.txt"
	fi
	kill $spid 2>/dev/null || true; wait $spid 2>/dev/null || true
	[ -n "$hpid" ] && { kill $hpid 2>/dev/null || true; wait $hpid 2>/dev/null || true; }
	[ -n "$mpid" ] && { kill $mpid 2>/dev/null || true; wait $mpid 2>/dev/null || true; }
	return 0
}
for r in $(seq "$rounds"); do
	uptime >>"$out/load.txt"
	for w in write:4KiB write:64KiB batch-write:4KiB; do
		for config in s3 no-s3 ${baseline:+s3base}; do
			run $config "${w%%:*}" "${w##*:}" "$r"
		done
	done
done
rm -rf "$base"
