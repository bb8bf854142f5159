#!/usr/bin/env bash
# membuf --http-cache against bazel-remote's HTTP cache, fresh server per run,
# runs taking turns. Usage: run.sh ITERATIONS
set -u
M="--mode http-get,http-put --size 64KiB,16MiB --concurrency 1,64 --connections 4 --duration 6s --rounds 2"
out=/tmp/h22/peer
mkdir -p $out
for i in $(seq 1 $1); do
  for srv in membuf br-uncompressed br-zstd; do
    d=/dev/shm/h22-$srv; rm -rf $d; mkdir -p $d
    case $srv in
      membuf)
        /tmp/membuf serve --listen 127.0.0.1:19200 --http 127.0.0.1:19201 --http-cache 127.0.0.1:19202 --dir $d --max-size 16GiB --scrub-rate 0 --log-level warn >/dev/null 2>$out/$srv-$i.log &
        P=$!; G=127.0.0.1:19200; H=127.0.0.1:19202; MET=http://127.0.0.1:19201/metrics ;;
      br-*)
        mode=${srv#br-}
        /tmp/br/bazel-remote --dir $d --max_size 16 --storage_mode $mode --enable_endpoint_metrics --http_address 127.0.0.1:18080 --grpc_address 127.0.0.1:19092 >$out/$srv-$i.log 2>&1 &
        P=$!; G=127.0.0.1:19092; H=127.0.0.1:18080; MET=http://127.0.0.1:18080/metrics ;;
    esac
    for t in $(seq 50); do curl -s -o /dev/null $MET && break; sleep 0.2; done
    echo "== $srv run $i $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/load.txt
    /tmp/membuf bench blobs --addr $G --http-addr $H --server-pid $P --server-metrics $MET $M --json $out/$srv-$i.json > $out/$srv-$i.txt 2>&1
    kill $P; wait $P 2>/dev/null
    rm -rf $d
  done
done
