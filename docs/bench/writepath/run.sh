#!/bin/bash
# Reproduces the write-path figures of docs/benchmarks.md ("The write path").
#
#   NOW=/path/to/membuf BEFORE=/path/to/membuf-b0e1639 OUT=dir ./run.sh
#
# NOW is `go build ./cmd/membuf` of this checkout; BEFORE the same built from
# b0e1639, before uploads had a memory budget. Run as root on an
# otherwise idle machine: it mounts a journaled ext4 image on a loop device
# (/mnt/j), and writes under /dev/shm and /var/tmp.
set -u
NOW=${NOW:?membuf binary of this checkout} BEFORE=${BEFORE:?membuf binary of b0e1639}
OUT=${OUT:-out}; mkdir -p "$OUT"
SHM=/dev/shm/writepath; DISK=/var/tmp/writepath; J=/mnt/j/writepath
log() { echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) $*"; }
start_server() { # BIN DIR [flags]: sets SP
  local bin=$1 dir=$2; shift 2
  rm -rf "$dir"; mkdir -p "$(dirname "$dir")"
  setsid "$bin" serve --dir "$dir" --listen 127.0.0.1:19200 --http 127.0.0.1:19201 "$@" >"$OUT/server.log" 2>&1 &
  SP=$!
  for _ in $(seq 100); do curl -sf http://127.0.0.1:19201/metrics >/dev/null && return; sleep 0.1; done
  echo "server did not start"; cat "$OUT/server.log"; exit 1
}
stop_server() { kill $SP; wait $SP 2>/dev/null; }
remote() { "$NOW" bench blobs --addr 127.0.0.1:19200 --server-pid $SP \
  --server-metrics http://127.0.0.1:19201/metrics --timeout 5m "$@"; }

# The journaled ext4: a loop-mounted image on the VM's disk.
if ! mountpoint -q /mnt/j; then
  truncate -s 20G /var/tmp/ext4j.img && mkfs.ext4 -q -F /var/tmp/ext4j.img
  mkdir -p /mnt/j && mount -o loop /var/tmp/ext4j.img /mnt/j
fi

log "tmpfs: membuf serve against the ceiling, interleaved"
rm -rf $SHM; mkdir -p $SHM
"$NOW" bench blobs --config serve,ceiling --mode write --dir $SHM --size 64KiB,1MiB,16MiB \
  --concurrency 1,8,64,256 --connections 4 --duration 6s --rounds 3 --timeout 40m \
  > "$OUT/tmpfs-serve-vs-ceiling.txt"
rm -rf $SHM

for state in quiet loaded; do
  LP=
  if [ $state = loaded ]; then for _ in 1 2 3 4; do sh -c 'while :; do :; done' & LP="$LP $!"; done; fi
  for fs in ext4 tmpfs; do
    d=$DISK; [ $fs = tmpfs ] && d=$SHM
    for v in now before; do
      b=$NOW; [ $v = before ] && b=$BEFORE
      log "peak RSS, 64 x 16 MiB uploads over 4 connections: $state $fs $v"
      start_server "$b" $d/s --max-size 4GiB
      remote --mode write --size 16MiB --concurrency 64 --connections 4 --duration 10s --rounds 1 \
        > "$OUT/rss-64x16MiB-$state-$fs-$v.txt"
      stop_server; rm -rf $d
    done
  done
  [ -n "$LP" ] && kill $LP
done

log "1,000 stalled uploads"
start_server "$NOW" $DISK/s
remote --mode stall --stall 20s --size 16MiB --concurrency 1000 --connections 4 --count 1000 --rounds 1 \
  > "$OUT/stall-1000.txt"
curl -s http://127.0.0.1:19201/metrics | grep -E '^membuf_upload_inflight' > "$OUT/stall-1000-metrics.txt"
stop_server; rm -rf $DISK

for mode in write read; do
  for v in now before; do
    b=$NOW; [ $v = before ] && b=$BEFORE
    log "1,000 concurrent 1 MiB ${mode}s: $v"
    start_server "$b" $DISK/s --max-size 8GiB
    remote --mode $mode --size 1MiB --blobs 64 --concurrency 1000 --connections 4 --duration 15s --rounds 1 \
      > "$OUT/c1000-1MiB-$mode-$v.txt"
    stop_server; rm -rf $DISK
  done
done

for r in 1 2 3 4; do
  for v in before now; do
    b=$NOW; [ $v = before ] && b=$BEFORE
    log "64 KiB blobs on journaled ext4, round $r: $v"
    start_server "$b" $J/s --max-size 8GiB
    remote --mode write --size 64KiB --concurrency 1,8,64 --connections 4 --duration 8s --rounds 1 \
      > "$OUT/ext4j-$v-r$r.txt"
    stop_server; rm -rf $J
  done
done

for r in 1 2; do
  for v in before now; do
    b=$NOW; [ $v = before ] && b=$BEFORE
    log "fsync count, 64 KiB blobs on journaled ext4, round $r: $v"
    rm -rf $J; sync
    start_server "$b" $J/s --max-size 8GiB
    perf stat -e 'syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync,syscalls:sys_enter_openat' \
      -p $SP -o "$OUT/syscalls-$v-r$r.perf" &
    PP=$!
    remote --mode write --size 64KiB --concurrency 1,64 --connections 4 --duration 8s --rounds 1 \
      > "$OUT/syscalls-$v-r$r.txt"
    kill -INT $PP; wait $PP
    curl -s http://127.0.0.1:19201/metrics | grep -E '^membuf_store_commit' > "$OUT/syscalls-$v-r$r.metrics"
    stop_server
  done
done
rm -rf $J
log done
