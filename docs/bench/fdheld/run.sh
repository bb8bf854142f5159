#!/usr/bin/env bash
# Writes that hold their file's descriptor (the checkout this script is
# in, from 7fe320a on) against the commit before (12af2e7): packs'
# 64-writer record benchmark and the store's streamed 4 KiB writes, the
# two builds alternating, into the current directory (run it from anywhere
# outside the repository); needs benchstat
# (go install golang.org/x/perf/cmd/benchstat@latest).
set -euo pipefail
out=$PWD
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
old=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$old"' EXIT
git -C "$repo" worktree add -q --force "$old" 12af2e7
(cd "$old" && go test -c -o "$out/packs-old.test" ./cas/disk/packs && go test -c -o "$out/disk-old.test" ./cas/disk)
(cd "$repo" && go test -c -o "$out/packs-new.test" ./cas/disk/packs && go test -c -o "$out/disk-new.test" ./cas/disk)
for i in $(seq 6); do
	for v in old new; do
		"$out/packs-$v.test" -test.run '^$' -test.bench 'ConcurrentRecordWrites/store=(growing|full)/lanes=4' \
			-test.benchtime 20000x >> "$out/packs-$v.txt"
	done
done
for i in $(seq 6); do
	for v in old new; do
		"$out/disk-$v.test" -test.run '^$' -test.bench 'PackedWrite/size=4KiB/mode=stream' \
			-test.benchmem -test.benchtime 20000x >> "$out/disk-$v.txt"
	done
done
rm -f "$out"/*.test
benchstat "$out/packs-old.txt" "$out/packs-new.txt"
benchstat "$out/disk-old.txt" "$out/disk-new.txt"
