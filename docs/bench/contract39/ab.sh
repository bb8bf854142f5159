#!/usr/bin/env bash
# Issue 39's no-regression check: the plain disk server (no --upstream)
# before the narrow contract (OLD) against after it (NEW), interleaved on
# tmpfs, every store removed after its run.
#
#   ab.sh OLD NEW ROUNDS OUT
#
# Each round, on a fresh store per server and in alternating order:
#   blobs-{old,new}-R: `membuf bench blobs` reads and writes of 4 KiB,
#     64 KiB and 1 MiB blobs, 64 streams over 4 connections, 3 s each: the
#     server's CPU per GiB and peak RSS (--server-pid).
# Then one `membuf bench build` (the Bazel mix: 1,000 actions, trees every
# 10th, 8 clients) with both servers side by side, ROUNDS rounds, which
# interleaves them itself.
set -euo pipefail
old=$1 new=$2 rounds=$3 out=$4
base=/dev/shm/membuf-ab39
mkdir -p "$out"
start() { # bin name port httpport
	mkdir -p "$base/$2"
	"$1" serve --listen 127.0.0.1:$3 --http 127.0.0.1:$4 --dir "$base/$2" --max-size 8GiB --scrub-rate 0 >"$out/$2.log" 2>&1 &
	echo $!
	for _ in $(seq 100); do curl -sf http://127.0.0.1:$4/healthz >/dev/null && return; sleep 0.1; done
	echo "membuf serve $2 did not start" >&2; exit 1
}
stop() { kill "$@" 2>/dev/null || true; for p in "$@"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done; }
echo "$(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" >"$out/machine.txt"
for round in $(seq "$rounds"); do
	order=(old new); [ $((round % 2)) = 0 ] && order=(new old)
	for which in "${order[@]}"; do
		bin=$old; [ "$which" = new ] && bin=$new
		rm -rf "$base"
		pid=$(start "$bin" "$which" 19600 19601)
		echo "$(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) round $round $which" | tee -a "$out/machine.txt"
		"$new" bench blobs --addr 127.0.0.1:19600 --server-pid "$pid" --mode write,read --size 4KiB,64KiB,1MiB \
			--concurrency 64 --connections 4 --duration 3s --rounds 1 --json "$out/blobs-$which-$round.json" >"$out/blobs-$which-$round.txt"
		stop "$pid"
	done
done
rm -rf "$base"
pold=$(start "$old" old 19610 19611)
pnew=$(start "$new" new 19620 19621)
"$new" bench build --config none --actions 1000 --rounds "$rounds" --concurrency 8 --tree-every 10 \
	--addr 127.0.0.1:19620,127.0.0.1:19610 --server-pid $pnew,$pold --dir "$base/bb" --json "$out/build.json" >"$out/build.txt" 2>&1 || true
stop "$pold" "$pnew"
rm -rf "$base"
echo "$(date +%T) done" >>"$out/machine.txt"
