#!/bin/sh
# --access-log all against off: two servers of this branch, on tmpfs.
rm -rf /dev/shm/aclog-off /dev/shm/aclog-all /dev/shm/aclog-bb2
/tmp/aclog-bin/membuf-new serve --listen 127.0.0.1:19750 --http 127.0.0.1:19751 --dir /dev/shm/aclog-off --max-size 8G --scrub-rate 0 > /tmp/aclog-off.log 2>&1 &
OFF=$!
/tmp/aclog-bin/membuf-new serve --listen 127.0.0.1:19760 --http 127.0.0.1:19761 --dir /dev/shm/aclog-all --max-size 8G --scrub-rate 0 --access-log all > /dev/null 2>&1 &
ALL=$!
sleep 3
echo "pids off=$OFF all=$ALL"; uptime
for r in 1 2 3; do
  for s in "off 19750 $OFF" "all 19760 $ALL"; do
    set -- $s
    /tmp/aclog-bin/membuf-new bench blobs --addr 127.0.0.1:$2 --server-pid $3 --mode read --size 4KiB --concurrency 64 --connections 4 \
      --duration 5s --rounds 1 --json /tmp/aclog-blobs-$1-$r.json > /tmp/aclog-blobs-$1-$r.txt 2>&1
    echo "round $r $1: $(grep -E '^ +read' /tmp/aclog-blobs-$1-$r.txt | head -1)"
  done
done
uptime
/tmp/aclog-bin/membuf-new bench build --config none --actions 1000 --rounds 6 --concurrency 8 --tree-every 10 \
  --addr 127.0.0.1:19760,127.0.0.1:19750 --server-pid $ALL,$OFF --dir /dev/shm/aclog-bb2
uptime
kill $OFF $ALL
wait
rm -rf /dev/shm/aclog-off /dev/shm/aclog-all /dev/shm/aclog-bb2
