#!/bin/sh
# Interleaved bench build: the base (1a19b3d) and aclog servers, on tmpfs.
set -e
rm -rf /dev/shm/aclog-base /dev/shm/aclog-new /dev/shm/aclog-bb
/tmp/aclog-bin/membuf-base serve --listen 127.0.0.1:19730 --http 127.0.0.1:19731 --dir /dev/shm/aclog-base --max-size 8G --scrub-rate 0 > /tmp/aclog-base.log 2>&1 &
OLD=$!
/tmp/aclog-bin/membuf-new serve --listen 127.0.0.1:19740 --http 127.0.0.1:19741 --dir /dev/shm/aclog-new --max-size 8G --scrub-rate 0 $NEWFLAGS > /tmp/aclog-new.log 2>&1 &
NEW=$!
echo "pids $OLD $NEW"
sleep 3
uptime
/tmp/aclog-bin/membuf-new bench build --config none --actions 1000 --rounds ${ROUNDS:-6} --concurrency 8 --tree-every 10 \
  --addr 127.0.0.1:19740,127.0.0.1:19730 --server-pid $NEW,$OLD --dir /dev/shm/aclog-bb --json /tmp/aclog-build.json || true
uptime
kill $OLD $NEW
wait
rm -rf /dev/shm/aclog-base /dev/shm/aclog-new /dev/shm/aclog-bb
