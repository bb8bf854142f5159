#!/usr/bin/env bash
# Tables from front.sh's output directory OUT: per round and workload, the
# server's CPU-s per GiB in the window with --s3 (uploads held: the front)
# and without, their ratio, the uploads' own CPU-s per GiB and per upload
# (uploads.txt), and front plus uploads over no --s3.
#
#   summary.sh OUT
set -euo pipefail
out=$1
window() { # file: "MiB/s CPU-s/GiB" per round, one line each
	awk '/CPU-s\/GiB/ {getline; for (i = 1; i <= NF; i++) if ($i == "remote") {print $(i+1), $(i+2); break}}' "$1"
}
printf "%-16s %-5s %-7s %9s %9s %7s %9s %10s %9s\n" workload round config "MiB/s" front "vs no-s3" uploads "µs/upload" together
for w in write-4KiB write-64KiB batch-write-4KiB; do
	for config in s3 s3base; do
		[ -f "$out/$config-$w.txt" ] || continue
		paste <(window "$out/no-s3-$w.txt") <(window "$out/$config-$w.txt") \
			<(awk -v n="$config-$w" '$1 == n {print $(NF-1), $(NF-3)}' "$out/uploads.txt") |
			awk -v w="$w" -v c="$config" '{
				printf "%-16s %-5d %-7s %9s %9.2f %7.2fx %9.2f %10.0f %8.2fx\n", w, NR, c, $3, $4, $4 / $2, $5, $6, ($4 + $5) / $2
			}'
	done
	paste <(window "$out/no-s3-$w.txt") | awk -v w="$w" '{printf "%-16s %-5d %-7s %9s %9.2f\n", w, NR, "no-s3", $1, $2}'
done
