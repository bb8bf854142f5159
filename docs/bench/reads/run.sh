#!/usr/bin/env bash
# ByteStream reads and HTTP/1.1 GETs of 64 KiB and 16 MiB blobs,
# 1 and 64 streams, against the read ceiling, membuf before and after, and
# bazel-remote in both storage modes. A fresh server and store (tmpfs) per
# round and server, servers taking turns; every store removed after its run.
#
#   docs/bench/reads/run.sh ROUNDS OUT MEMBUF_OLD MEMBUF_NEW BAZEL_REMOTE [SECONDS]
#
# MEMBUF_NEW also drives every run (membuf bench blobs --addr): the same
# client for every server.
set -u
rounds=$1 out=$2 old=$3 new=$4 br=$5 secs=${6:-6}
mkdir -p "$out"
G=127.0.0.1:19300 M=127.0.0.1:19301 H=127.0.0.1:19302
for i in $(seq 1 "$rounds"); do
  for srv in ceiling membuf-old membuf-new br-uncompressed br-zstd; do
    d=/dev/shm/r34-$srv; rm -rf "$d"; mkdir -p "$d"
    modes=read,http-get http=(--http-addr $H) met=http://$M/metrics
    case $srv in
      ceiling)
        "$new" ceiling --listen $G --http $M >"$out/$srv-$i.log" 2>&1 &
        modes=read http=() ;;
      membuf-*)
        bin=$old; [ $srv = membuf-new ] && bin=$new
        "$bin" serve --listen $G --http $M --http-cache $H --dir "$d" --max-size 16GiB \
          --scrub-rate 0 --log-level warn >"$out/$srv-$i.log" 2>&1 & ;;
      br-*)
        "$br" --dir "$d" --max_size 16 --storage_mode "${srv#br-}" --enable_endpoint_metrics \
          --http_address $H --grpc_address $G >"$out/$srv-$i.log" 2>&1 &
        met=http://$H/metrics ;;
    esac
    P=$!
    for _ in $(seq 100); do curl -s -o /dev/null "$met" && break; sleep 0.1; done
    "$new" bench blobs --addr $G "${http[@]}" --server-pid $P --server-metrics "$met" \
      --mode $modes --size 64KiB,16MiB --concurrency 1,64 --connections 4 \
      --duration "${secs}s" --rounds 1 --json "$out/$srv-$i.json" >"$out/$srv-$i.txt" 2>&1
    echo "$srv $i $(grep VmHWM /proc/$P/status)" >>"$out/hwm.txt"
    kill $P; wait $P 2>/dev/null; rm -rf "$d"
  done
done
