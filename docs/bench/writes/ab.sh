#!/bin/bash
# Two builds of membuf side by side, each against its own `membuf ceiling`:
# ByteStream writes of fresh 4 KiB and 64 KiB blobs, 64 streams over 4
# connections, 3 s a case, a fresh store per run (removed after), the order
# of the two flipped each round. docs/benchmarks.md, "Writes against the
# ceiling".
#
#   ROOT=/dev/shm ab.sh OUT ROUNDS A B    # runs $BIN/membuf-A and $BIN/membuf-B (BIN=/tmp)
#   summarize.sh OUT                      # a line per run: CPU-s/GiB, MiB/s, against the ceiling
set -u
OUT=$1; ROUNDS=$2; A=$3; B=$4; ROOT=${ROOT:-/dev/shm}; BIN=${BIN:-/tmp}
mkdir -p $OUT
for r in $(seq $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then ORDER="$A $B"; else ORDER="$B $A"; fi
  for v in $ORDER; do
    D=$ROOT/ab-$v; rm -rf $D; mkdir -p $D
    echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) round $r $v" >> $OUT/load.txt
    $BIN/membuf-$v bench blobs --config serve,ceiling --mode write --dir $D --size 4KiB,64KiB \
      --concurrency 64 --connections 4 --duration 3s --rounds 1 > $OUT/blobs-$v-$r.txt 2>&1
    rm -rf $D
  done
done
