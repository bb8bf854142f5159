#!/usr/bin/env bash
# An edge in front of a central cache: `membuf serve --upstream grpc://CENTRAL` (the
# edge) against the same server without an upstream (plain), interleaved,
# every store on tmpfs and removed after its run.
#
#   edge.sh MEMBUF ROUNDS OUT        (EDGE_READS=no: the writes only)
#
# Each round runs, on fresh stores:
#   write-{4KiB,64KiB}-{plain,edge}: ByteStream writes of new blobs, 64
#     streams over 4 connections, 6 s; the server's CPU per GiB (the edge's
#     includes its uploads to central, which run in the same window). After
#     the edge's 4 KiB run the queue is drained, and its metrics give the
#     blobs per upstream request (uploads_total{ok} / put_calls_total).
#   write-{4KiB,64KiB}-held: the edge's front alone: its upstream is a
#     listener that accepts connections and never answers, so the uploads
#     wait (for the connection) through the window and the CPU measured is
#     the acknowledged writes' own (receive, store, journal, queue).
#   read-16MiB-{miss,hit}: 64 reads of 64 distinct 16 MiB blobs at 64
#     streams, each read once: "miss", uploaded through central
#     (--seed-addr), so that each read misses on the edge's disk and is
#     filled from central, streamed as it arrives; "hit", uploaded through
#     the edge itself, read from its disk.
set -euo pipefail
bin=$1 rounds=$2 out=$3
base=/dev/shm/membuf-edge
mkdir -p "$out"
start() { # name port httpport [flags...]
	local name=$1 port=$2 http=$3; shift 3
	mkdir -p "$base/$name"
	"$bin" serve --listen 127.0.0.1:$port --http 127.0.0.1:$http --dir "$base/$name" --scrub-rate 0 "$@" >"$out/$name.log" 2>&1 &
	echo $!
	for _ in $(seq 100); do curl -sf http://127.0.0.1:$http/healthz >/dev/null && return; sleep 0.1; done
	echo "membuf serve $name did not start" >&2; exit 1
}
metric() { # httpport name-with-labels
	curl -sf http://127.0.0.1:$1/metrics | awk -v m="$2" '$1 == m {print $2}'
}
stop() { # pids: the servers start() ran in a subshell, so wait cannot wait for them
	kill "$@" 2>/dev/null || true
	for p in "$@"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
}
for round in $(seq "$rounds"); do
	for size in 4KiB 64KiB; do
		for config in plain edge held; do
			rm -rf "$base"
			flags=() central=
			if [ "$config" = edge ]; then
				central=$(start central 19110 19111)
				flags=(--upstream grpc://127.0.0.1:19110)
			fi
			if [ "$config" = held ]; then
				python3 -c 'import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 19112)); s.listen(1024); time.sleep(600)' &
				central=$!
				# The listener first: an edge that finds the port closed
				# counts its upstream down at once, a different case.
				for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/19112) 2>/dev/null && break; sleep 0.1; done
				flags=(--upstream grpc://127.0.0.1:19112 --upstream-timeout 5m)
			fi
			spid=$(start $config 19100 19101 "${flags[@]}")
			"$bin" bench blobs --addr 127.0.0.1:19100 --server-pid "$spid" --mode write --size "$size" \
				--concurrency 64 --connections 4 --duration 6s --rounds 1 --json "$out/write-$size-$config-$round.json" \
				>"$out/write-$size-$config-$round.txt"
			if [ "$config" = edge ]; then
				for _ in $(seq 600); do [ "$(metric 19101 membuf_tier_upload_queue_length)" = 0 ] && break; sleep 0.1; done
				echo "uploads $(metric 19101 'membuf_tier_uploads_total{outcome="ok"}') put_calls $(metric 19101 membuf_tier_put_calls_total)" \
					>"$out/write-$size-$config-$round.uploads"
			fi
			stop "$spid" $central
		done
	done
	[ "${EDGE_READS:-yes}" = yes ] || continue
	for config in miss hit; do
		rm -rf "$base"
		central=$(start central 19110 19111)
		spid=$(start edge 19100 19101 --upstream grpc://127.0.0.1:19110)
		seed=()
		[ "$config" = miss ] && seed=(--seed-addr 127.0.0.1:19110)
		"$bin" bench blobs --addr 127.0.0.1:19100 --server-pid "$spid" "${seed[@]}" --mode read --size 16MiB \
			--concurrency 64 --connections 4 --blobs 64 --count 64 --rounds 1 --json "$out/read-16MiB-$config-$round.json" \
			>"$out/read-16MiB-$config-$round.txt"
		stop "$spid" "$central"
	done
done
rm -rf "$base"
