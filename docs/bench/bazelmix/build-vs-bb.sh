#!/bin/bash
# `membuf bench build` against bb-storage and one or more `membuf serve`
# binaries, all fresh, in one interleaved run (the first server of each
# round rotating):
#
#   BB=bb_storage build-vs-bb.sh ROOT OUT name=binary [name=binary ...]
#
# ROOT holds every store (its file system is what is measured: /dev/shm
# for tmpfs, a directory on ext4 for a journaled disk) and is emptied
# first and after. OUT gets the report. bb-storage gets a local CAS and
# action cache (../writepath/peers/bbconfig.sh with BB_AC=1, 4 GiB); the
# membuf servers run with their defaults and an 8 GiB bound. ROUNDS
# (default 6) rounds of 1,000 actions.
set -eu
ROOT=$1; OUT=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
BB=${BB:-bb_storage}
rm -rf $ROOT; mkdir -p $ROOT
BB_AC=1 BB_GIB=4 $HERE/../writepath/peers/bbconfig.sh $ROOT/bb 19710 19711 >/dev/null
$BB $ROOT/bb/bb.json > $ROOT/bb.log 2>&1 & PIDS=$!
ADDRS=127.0.0.1:19710; ALL=$PIDS; port=19730
for spec in "$@"; do
  name=${spec%%=*}; bin=${spec#*=}
  mkdir -p $ROOT/$name
  $bin serve --listen 127.0.0.1:$port --http "" --dir $ROOT/$name --max-size 8GiB > $ROOT/$name.log 2>&1 & p=$!
  ADDRS=$ADDRS,127.0.0.1:$port; PIDS=$PIDS,$p; ALL="$ALL $p"; port=$((port+1))
done
sleep 2
${MEMBUF:-membuf} bench build --config none --actions 1000 --rounds ${ROUNDS:-6} --concurrency 8 \
  --addr $ADDRS --server-pid $PIDS > $OUT 2>&1 || true
kill $ALL; wait 2>/dev/null || true
rm -rf $ROOT
sed -n '/^server CPU/,$p' $OUT
