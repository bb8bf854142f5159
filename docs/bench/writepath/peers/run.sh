#!/bin/bash
# Side by side: membuf serve, bazel-remote (uncompressed) and bb-storage (a local CAS on
# file-backed block devices), ByteStream writes of fresh random blobs, in interleaved rounds
# after a warm-up round, on one filesystem. docs/benchmarks.md, "Writes against bazel-remote
# and bb-storage".
#
#   NOW=membuf BR=bazel-remote BB=bb_storage run.sh FS_ROOT OUT [rounds]
#
# NOW is `go build ./cmd/membuf`; BR and BB are the peers' binaries, built by you from their
# own repositories (the figures used bazel-remote ead2079, `go build .`, and bb-storage
# bdd785e, `go build ./cmd/bb_storage` with its patches/org_golang_google_genproto_googleapis_bytestream
# applied to a local copy of that module and a replace to it). Stores take SIZE_GIB (3) GiB
# each, bb-storage's block files BB_GIB (6): on tmpfs that is memory, so leave room.
# summarize.py OUT prints the table.
set -u
ROOT=$1; OUT=$2; ROUNDS=${3:-3}
mkdir -p $OUT
M=${NOW:-membuf}; BR=${BR:-/tmp/bazel-remote-bin}; BB=${BB:-/tmp/bb-storage-bin}
wait_http() { for _ in $(seq 150); do curl -sf "http://127.0.0.1:$1/metrics" >/dev/null && return 0; sleep 0.1; done; echo "no metrics on $1"; return 1; }
declare -A PID
start_all() {
  rm -rf $ROOT/membuf $ROOT/br $ROOT/bb; mkdir -p $ROOT/membuf $ROOT/br $ROOT/bb
  setsid $M serve --dir $ROOT/membuf/s --listen 127.0.0.1:19400 --http 127.0.0.1:19401 --max-size ${SIZE_GIB:-3}GiB > $OUT/membuf.log 2>&1 & PID[membuf]=$!
  setsid $BR --dir $ROOT/br/s --max_size ${SIZE_GIB:-3} --storage_mode uncompressed --enable_endpoint_metrics --grpc_address 127.0.0.1:19410 --http_address 127.0.0.1:19411 > $OUT/br.log 2>&1 & PID[br]=$!
  "$(dirname "$0")"/bbconfig.sh $ROOT/bb 19420 19421
  setsid $BB $ROOT/bb/bb.json > $OUT/bb.log 2>&1 & PID[bb]=$!
  wait_http 19401; wait_http 19411; wait_http 19421
}
stop_all() { for k in membuf br bb; do kill ${PID[$k]} 2>/dev/null; wait ${PID[$k]} 2>/dev/null; done; }
start_all
echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) servers up"
ORDER=(membuf br bb)
# A warm-up round, not counted: every server's first writes (a fresh store,
# bb-storage's block files) are behind it.
for s in "${ORDER[@]}"; do
  case $s in membuf) P=19400;; br) P=19410;; bb) P=19420;; esac
  echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) warm-up $s"
  $M bench blobs --addr 127.0.0.1:$P --mode write --size 64KiB,1MiB,16MiB --concurrency 1,8,64 --connections 4 \
    --duration 2s --rounds 1 --timeout 10m > $OUT/warm-$s.txt 2>&1 || echo "   failed: $(tail -1 $OUT/warm-$s.txt)"
done
for r in $(seq $ROUNDS); do
  # Each round starts with the next server: none always goes first.
  k=$(( (r - 1) % 3 ))
  for s in "${ORDER[@]:$k}" "${ORDER[@]:0:$k}"; do
    case $s in membuf) P=19400;; br) P=19410;; bb) P=19420;; esac
    echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) round $r $s"
    $M bench blobs --addr 127.0.0.1:$P --server-pid ${PID[$s]} --server-metrics http://127.0.0.1:$((P+1))/metrics \
      --mode write --size 64KiB,1MiB,16MiB --concurrency 1,8,64 --connections 4 --duration 3s --rounds 1 --timeout 10m \
      --json $OUT/$s-r$r.json > $OUT/$s-r$r.txt 2>&1 || echo "   failed: $(tail -1 $OUT/$s-r$r.txt)"
  done
done
stop_all
rm -rf $ROOT/membuf $ROOT/br $ROOT/bb
echo "== $(date +%T) done"
