#!/bin/bash
# A real Bazel build with the Bazel size mix against fresh servers, side by side:
# membuf serve (defaults) and bb-storage (../bbconfig.sh with BB_AC=1: a local
# CAS and action cache).
# Per round and server: start it fresh, `bazel clean`, a cold build (every
# action runs and uploads), `bazel clean`, a warm rebuild (every action a
# remote cache hit); the server's CPU (user+system from /proc) over each
# build, Bazel's wall time, and the server's peak RSS (VmHWM).
#
#   NOW=membuf BB=bb_storage run.sh FS_ROOT OUT [rounds] [rules]
#
# With ALT set (a command, e.g. "env GOMAXPROCS=1 membuf"), the second
# server is `$ALT serve`, a membuf to compare with NOW, instead of bb-storage.
#
# Bazel is Debian's bazel-bootstrap (4.2.3). BB is bb-storage built from its
# own repository (see ../smallblobs/run.sh). summarize.py OUT prints the table.
set -u
ROOT=$1; OUT=$2; ROUNDS=${3:-3}; RULES=${4:-1500}
M=${NOW:-membuf}; BB=${BB:-/tmp/bb-storage-bin}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p $OUT $ROOT
WS=$ROOT/ws; rm -rf $WS; python3 $HERE/workspace.py $WS $RULES
BZ="bazel --output_user_root=$ROOT/bazel-root"
export HOME=$ROOT/home
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
wait_port() { for _ in $(seq 150); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; echo "nothing on $1"; return 1; }
run_server() { # name round
  local s=$1 r=$2 pid
  rm -rf $ROOT/$s; mkdir -p $ROOT/$s
  case $s in
    membuf) setsid $M serve --dir $ROOT/$s/store --listen 127.0.0.1:19700 --http '' > $OUT/$s-r$r.log 2>&1 & pid=$!; P=19700;;
    alt) setsid $ALT serve --dir $ROOT/$s/store --listen 127.0.0.1:19702 --http '' > $OUT/$s-r$r.log 2>&1 & pid=$!; P=19702;;
    bb) BB_AC=1 BB_GIB=${BB_GIB:-4} $HERE/../bbconfig.sh $ROOT/$s 19710 19711; setsid $BB $ROOT/$s/bb.json > $OUT/$s-r$r.log 2>&1 & pid=$!; P=19710;;
  esac
  wait_port $P || return
  (cd $WS && $BZ clean >/dev/null 2>&1)
  for phase in cold warm; do
    [ $phase = warm ] && (cd $WS && $BZ clean >/dev/null 2>&1)
    local a=$(ticks $pid) t0=$(date +%s.%N)
    (cd $WS && $BZ build --remote_cache=grpc://127.0.0.1:$P --spawn_strategy=local --noshow_progress //... > $OUT/$s-r$r-$phase.bazel 2>&1) || echo "   bazel failed: $s r$r $phase"
    local t1=$(date +%s.%N) b=$(ticks $pid)
    echo "$s $r $phase wall=$(awk "BEGIN{print $t1 - $t0}") cpu_ticks=$((b-a)) $(grep -o 'INFO: [0-9]* processes: .*' $OUT/$s-r$r-$phase.bazel | head -1)" | tee -a $OUT/results.txt
  done
  echo "$s $r peak_rss_kib=$(awk '/VmHWM/{print $2}' /proc/$pid/status)" | tee -a $OUT/results.txt
  kill $pid; wait $pid 2>/dev/null
  rm -rf $ROOT/$s
}
echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) $RULES rules" | tee -a $OUT/results.txt
# A warm-up build: Bazel's server starts, the workspace is loaded.
(cd $WS && $BZ build --nobuild //... >/dev/null 2>&1)
# And a warm-up round, not counted: Bazel's first builds with a remote
# cache run slower whatever the server (its JVM warming up: the first
# server of round 1 took 23-25 s to others' 15-19 s for its cold build),
# which would charge that to whichever server goes first.
(OUT=$OUT/warmup; mkdir -p $OUT; run_server membuf 0 > /dev/null)
ORDER=(membuf bb)
[ -n "${ALT:-}" ] && ORDER=(membuf alt)
for r in $(seq $ROUNDS); do
  k=$(( (r - 1) % 2 ))
  for s in "${ORDER[@]:$k}" "${ORDER[@]:0:$k}"; do run_server $s $r; done
done
(cd $WS && $BZ shutdown)
echo "== $(date +%T) done" | tee -a $OUT/results.txt
