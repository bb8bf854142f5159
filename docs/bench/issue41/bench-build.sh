#!/bin/sh
# Interleaved bench build: the base (1a19b3d) and ac41 servers, on tmpfs.
set -e
rm -rf /dev/shm/ac41-base /dev/shm/ac41-new /dev/shm/ac41-bb
/tmp/ac41-bin/membuf-base serve --listen 127.0.0.1:19730 --http 127.0.0.1:19731 --dir /dev/shm/ac41-base --max-size 8G --scrub-rate 0 > /tmp/ac41-base.log 2>&1 &
OLD=$!
/tmp/ac41-bin/membuf-new serve --listen 127.0.0.1:19740 --http 127.0.0.1:19741 --dir /dev/shm/ac41-new --max-size 8G --scrub-rate 0 $NEWFLAGS > /tmp/ac41-new.log 2>&1 &
NEW=$!
echo "pids $OLD $NEW"
sleep 3
uptime
/tmp/ac41-bin/membuf-new bench build --config none --actions 1000 --rounds ${ROUNDS:-6} --concurrency 8 --tree-every 10 \
  --addr 127.0.0.1:19740,127.0.0.1:19730 --server-pid $NEW,$OLD --dir /dev/shm/ac41-bb --json /tmp/ac41-build.json || true
uptime
kill $OLD $NEW
wait
rm -rf /dev/shm/ac41-base /dev/shm/ac41-new /dev/shm/ac41-bb
