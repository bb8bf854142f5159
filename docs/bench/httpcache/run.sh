#!/usr/bin/env bash
# Peak RSS per size: a fresh server per (server, size), runs taking turns.
set -u
out=/tmp/h22/rss; mkdir -p $out
for i in $(seq 1 $1); do
 for size in 64KiB 16MiB; do
  for srv in membuf br-uncompressed; do
    d=/dev/shm/h22r-$srv; rm -rf $d; mkdir -p $d
    case $srv in
      membuf)
        /tmp/membuf serve --listen 127.0.0.1:19200 --http 127.0.0.1:19201 --http-cache 127.0.0.1:19202 --dir $d --max-size 16GiB --scrub-rate 0 --log-level warn >/dev/null 2>$out/$srv-$size-$i.log &
        P=$!; G=127.0.0.1:19200; H=127.0.0.1:19202; MET=http://127.0.0.1:19201/metrics ;;
      br-*)
        /tmp/br/bazel-remote --dir $d --max_size 16 --storage_mode uncompressed --enable_endpoint_metrics --http_address 127.0.0.1:18080 --grpc_address 127.0.0.1:19092 >$out/$srv-$size-$i.log 2>&1 &
        P=$!; G=127.0.0.1:19092; H=127.0.0.1:18080; MET=http://127.0.0.1:18080/metrics ;;
    esac
    for t in $(seq 50); do curl -s -o /dev/null $MET && break; sleep 0.2; done
    /tmp/membuf bench blobs --addr $G --http-addr $H --server-pid $P --server-metrics $MET --mode http-get,http-put --size $size --concurrency 1,64 --connections 4 --duration 6s --rounds 2 --json $out/$srv-$size-$i.json > $out/$srv-$size-$i.txt 2>&1
    echo "$srv $size $i VmHWM over the whole run: $(grep VmHWM /proc/$P/status)" >> $out/hwm.txt
    kill $P; wait $P 2>/dev/null; rm -rf $d
  done
 done
done
