#!/bin/bash
# Small-blob ByteStream writes side by side: membuf serve as it ships (blobs
# up to --pack-max packed into segments), membuf serve with --pack-max 0 (a file per
# blob, as before), bb-storage (a local CAS on file-backed block devices, the config of
# ../bbconfig.sh) and `membuf ceiling` (received and hashed, never
# stored). Fresh random blobs, interleaved rounds after a warm-up round, one filesystem.
# docs/benchmarks.md, "Small blobs".
#
#   NOW=membuf BB=bb_storage run.sh FS_ROOT OUT [rounds] [sizes] [streams]
#
# NOW is `go build ./cmd/membuf`; BB is bb-storage built by you from its own repository
# (bdd785e, `go build ./cmd/bb_storage` with its bytestream patch applied to a local copy
# of that module and a replace to it). Each membuf store holds STORE_GIB (3) GiB,
# bb-storage's block files BB_GIB (6); WARM (2s) is how long the warm-up writes each
# size: with stores smaller than what the warm-up writes, the rounds measure stores that
# are full and evicting (steady state: on a VM, pages the kernel reuses cost no first
# touch from the host). PACK_FLAGS are more flags for the packs server (--pack-sync 100ms).
# summarize.py OUT prints the table.
set -u
ROOT=$1; OUT=$2; ROUNDS=${3:-3}; SIZES=${4:-4KiB,64KiB}; STREAMS=${5:-64}
mkdir -p $OUT
M=${NOW:-membuf}; BB=${BB:-/tmp/bb-storage-bin}
PEERS=$(dirname "$0")/..
wait_http() { for _ in $(seq 150); do curl -sf "http://127.0.0.1:$1/metrics" >/dev/null && return 0; sleep 0.1; done; echo "no metrics on $1"; return 1; }
declare -A PID PORT=([packs]=19500 [files]=19510 [bb]=19520 [ceiling]=19530)
start_all() {
  rm -rf $ROOT/packs $ROOT/files $ROOT/bb; mkdir -p $ROOT/packs $ROOT/files $ROOT/bb
  setsid $M serve --dir $ROOT/packs/s --listen 127.0.0.1:19500 --http 127.0.0.1:19501 --max-size ${STORE_GIB:-3}GiB ${PACK_FLAGS:-} > $OUT/packs.log 2>&1 & PID[packs]=$!
  setsid $M serve --dir $ROOT/files/s --listen 127.0.0.1:19510 --http 127.0.0.1:19511 --max-size ${STORE_GIB:-3}GiB --pack-max 0 > $OUT/files.log 2>&1 & PID[files]=$!
  $PEERS/bbconfig.sh $ROOT/bb 19520 19521
  setsid $BB $ROOT/bb/bb.json > $OUT/bb.log 2>&1 & PID[bb]=$!
  setsid $M ceiling --listen 127.0.0.1:19530 --http 127.0.0.1:19531 > $OUT/ceiling.log 2>&1 & PID[ceiling]=$!
  wait_http 19501; wait_http 19511; wait_http 19521; wait_http 19531
}
stop_all() { for k in packs files bb ceiling; do kill ${PID[$k]} 2>/dev/null; wait ${PID[$k]} 2>/dev/null; done; }
start_all
echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) servers up"
ORDER=(packs files bb ceiling)
for s in "${ORDER[@]}"; do
  echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) warm-up $s"
  $M bench blobs --addr 127.0.0.1:${PORT[$s]} --mode write --size $SIZES --concurrency $STREAMS --connections 4 \
    --duration ${WARM:-2s} --rounds 1 --timeout 10m > $OUT/warm-$s.txt 2>&1 || echo "   failed: $(tail -1 $OUT/warm-$s.txt)"
done
for r in $(seq $ROUNDS); do
  # Each round starts with the next server: none always goes first.
  k=$(( (r - 1) % ${#ORDER[@]} ))
  for s in "${ORDER[@]:$k}" "${ORDER[@]:0:$k}"; do
    P=${PORT[$s]}
    echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) round $r $s"
    $M bench blobs --addr 127.0.0.1:$P --server-pid ${PID[$s]} --server-metrics http://127.0.0.1:$((P+1))/metrics \
      --mode write --size $SIZES --concurrency $STREAMS --connections 4 --duration 3s --rounds 1 --timeout 10m \
      --json $OUT/$s-r$r.json > $OUT/$s-r$r.txt 2>&1 || echo "   failed: $(tail -1 $OUT/$s-r$r.txt)"
  done
done
stop_all
rm -rf $ROOT/packs $ROOT/files $ROOT/bb
echo "== $(date +%T) done"
