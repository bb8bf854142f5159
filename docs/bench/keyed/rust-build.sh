#!/usr/bin/env bash
# A real Rust build through sccache 0.16.0, its cache membuf's keyed
# namespace or sccache's own local disk cache.
#   1. Fresh caches: a new membuf store and an empty local directory.
#   2. Cold, once each: `cargo build --release` of docs/bench/keyed/crate
#      (29 crates from crates.io, pinned by its Cargo.lock) into each cache.
#   3. Warm, ROUNDS times each, taking turns (membuf, disk, disk, membuf,
#      membuf, disk, ...: each pair's order alternates, so that a drift of
#      the machine's load falls on both): the target directory emptied, and
#      for membuf sccache's local directory too (the disk configuration's
#      local directory is its cache), a new sccache server, the same build,
#      timed, with sccache's hit counts and membuf's CPU time for the build.
# A warm build writes nothing, so every warm build finds the same cache.
# Usage: rust-build.sh ROUNDS OUTDIR   (MEMBUF, SCCACHE, WORK override the
# binaries and the scratch directory). Prints one line per build; OUTDIR
# gets each build's sccache stats (JSON) and membuf's log.
set -euo pipefail
rounds=${1:-8}
out=${2:-/tmp/keyed-rust-out}
here=$(cd "$(dirname "$0")" && pwd)
membuf=${MEMBUF:-/tmp/membuf}
sccache=${SCCACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/membuf-tools/sccache-venv/bin/sccache}
work=${WORK:-/tmp/keyed-rust}
mkdir -p "$work" "$out"
rm -rf "$work/crate" && cp -r "$here/crate" "$work/crate"
# The same CARGO_HOME and target path for every build: sccache's keys hash
# the sources' and outputs' paths.
export CARGO_HOME=$work/cargo-home CARGO_INCREMENTAL=0
(cd "$work/crate" && cargo fetch --locked >/dev/null)
export RUSTC_WRAPPER=$sccache SCCACHE_CONF=$work/no-config SCCACHE_SERVER_PORT=14301 SCCACHE_IDLE_TIMEOUT=600
target=$work/target
clk=$(getconf CLK_TCK)
rm -rf "$work/store" "$work/local-membuf" "$work/local-disk" "$work/ready"

"$membuf" serve --listen 127.0.0.1:0 --http "" --http-cache 127.0.0.1:0 --dir "$work/store" \
	--ready-file "$work/ready" >"$out/membuf.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; "$sccache" --stop-server >/dev/null 2>&1 || true' EXIT
for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
addr=$(tr ' ' '\n' <"$work/ready" | sed -n 's/^http-cache=//p')

# cpu: membuf's user+sys clock ticks so far.
cpu() { local st; read -r -a st <"/proc/$pid/stat"; echo $((st[13] + st[14])); }

# build CONFIG NAME: one timed `cargo build --release` into an empty
# target with a new sccache server on CONFIG's cache; prints the wall
# seconds, sccache's counts and (membuf) the server's CPU seconds.
build() {
	rm -rf "$target"
	if [ "$1" = membuf ]; then
		export SCCACHE_WEBDAV_ENDPOINT=http://$addr/sccache/ SCCACHE_DIR=$work/local-membuf
	else
		unset SCCACHE_WEBDAV_ENDPOINT
		export SCCACHE_DIR=$work/local-disk
	fi
	"$sccache" --start-server >/dev/null
	local t0 t1 c0 c1
	c0=$(cpu)
	t0=$(date +%s.%N)
	(cd "$work/crate" && cargo build --release --offline --locked --target-dir "$target" >/dev/null 2>&1)
	t1=$(date +%s.%N)
	c1=$(cpu)
	"$sccache" --show-stats --stats-format json >"$out/$2.json"
	"$sccache" --stop-server >/dev/null
	[ "$1" = membuf ] && rm -rf "$work/local-membuf"
	python3 - "$out/$2.json" "$t0" "$t1" "$2" "$1" "$c0" "$c1" "$clk" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["stats"]
n = lambda c: sum(c["counts"].values())
hits, misses = n(s["cache_hits"]), n(s["cache_misses"])
rate = hits / (hits + misses) if hits + misses else 0
server = f"  membuf CPU {(int(sys.argv[7]) - int(sys.argv[6])) / int(sys.argv[8]):5.2f} s" if sys.argv[5] == "membuf" else ""
print(f"{sys.argv[4]:<16} wall {float(sys.argv[3]) - float(sys.argv[2]):7.2f} s  hits {hits:3d}  misses {misses:3d}  hit rate {rate:6.1%}  "
      f"not cacheable {s['requests_not_cacheable']:3d}  writes {s['cache_writes']:3d}  write errors {s['cache_write_errors']}  read errors {s['cache_read_errors']}{server}", flush=True)
PY
}

build membuf membuf-cold
build disk disk-cold
for round in $(seq 1 "$rounds"); do
	if [ $((round % 2)) = 1 ]; then
		build membuf "membuf-warm-$round"
		build disk "disk-warm-$round"
	else
		build disk "disk-warm-$round"
		build membuf "membuf-warm-$round"
	fi
done
echo "cache sizes: $(du -sh "$work/store" "$work/local-disk" | tr '\n\t' '  ')"
