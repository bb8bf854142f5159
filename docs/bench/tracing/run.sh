#!/usr/bin/env bash
# Tracing at 1% sampling against none: 64 KiB ByteStream reads from two
# servers of one build on tmpfs, both up for the whole run, one with
# --otlp-endpoint to a receiver that drops every export (otlpsink.go),
# taking turns for ROUNDS rounds (the first to go alternating). Prints each
# round's server CPU per GiB and allocated KiB per MiB read, and the median
# of the rounds' traced:plain CPU ratios.
#
#   docs/bench/tracing/run.sh MEMBUF [ROUNDS] [SECONDS] [OUT]
set -eu
bin=$1 rounds=${2:-9} secs=${3:-6} out=${4:-/tmp/tracing-bench}
here=$(dirname "$0")
mkdir -p "$out"
rm -rf /dev/shm/tracing-plain /dev/shm/tracing-traced
go build -o "$out/otlpsink" "$here/otlpsink.go"
"$out/otlpsink" 127.0.0.1:19418 &
SINK=$!
common=(--max-size 4GiB --scrub-rate 0 --log-level warn)
"$bin" serve --listen 127.0.0.1:19410 --http 127.0.0.1:19411 --dir /dev/shm/tracing-plain "${common[@]}" >"$out/plain.log" 2>&1 &
PLAIN=$!
"$bin" serve --listen 127.0.0.1:19420 --http 127.0.0.1:19421 --dir /dev/shm/tracing-traced "${common[@]}" \
  --otlp-endpoint http://127.0.0.1:19418 --trace-sampling 0.01 >"$out/traced.log" 2>&1 &
TRACED=$!
trap 'kill $PLAIN $TRACED $SINK; wait; rm -rf /dev/shm/tracing-plain /dev/shm/tracing-traced' EXIT
for p in 19411 19421; do
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$p/metrics" && break; sleep 0.1; done
done
uptime
for r in $(seq 1 "$rounds"); do
  order="plain traced"; [ $((r % 2)) = 0 ] && order="traced plain"
  for srv in $order; do
    port=19410 pid=$PLAIN; [ $srv = traced ] && port=19420 pid=$TRACED
    "$bin" bench blobs --addr 127.0.0.1:$port --server-pid $pid --server-metrics http://127.0.0.1:$((port + 1))/metrics \
      --mode read --size 64KiB --concurrency 64 --connections 4 --duration "${secs}s" --rounds 1 \
      --json "$out/$srv-$r.json" >"$out/$srv-$r.txt" 2>&1
  done
done
uptime
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def server(name, r):
    return json.load(open(f"{out}/{name}-{r}.json"))["results"][0]["server"]
ratios = []
for r in range(1, rounds + 1):
    p, t = server("plain", r), server("traced", r)
    ratios.append(t["cpu_seconds_per_gib"] / p["cpu_seconds_per_gib"])
    print(f"round {r}: CPU-s/GiB plain {p['cpu_seconds_per_gib']:.3f} traced {t['cpu_seconds_per_gib']:.3f} ({ratios[-1]:.3f}x); "
          f"alloc KiB/MiB plain {p['alloc_bytes_per_mib'] / 1024:.1f} traced {t['alloc_bytes_per_mib'] / 1024:.1f}")
print(f"median traced:plain CPU per GiB {statistics.median(ratios):.3f}x (rounds {min(ratios):.3f}x to {max(ratios):.3f}x)")
PY
