#!/bin/bash
# summarize.sh OUT: for each run of ab.sh, the server's CPU-s/GiB (MiB/s) and
# its ceiling's at 4 KiB and 64 KiB, and their ratio.
for f in $(ls $1/blobs-*.txt | sort -t- -k3); do
  awk -v b=$(basename $f .txt) '/server process/{p=1; next}
    p && /write 4 KiB/ && $4=="ceiling"{c4=$6} p && /write 4 KiB/ && $4=="serve"{s4=$6; m4=$5}
    p && /write 64 KiB/ && $4=="ceiling"{c64=$6} p && /write 64 KiB/ && $4=="serve"{s64=$6; m64=$5}
    END{printf "%-16s 4 KiB %6.2f (%5.1f) ceiling %5.2f: %.2fx | 64 KiB %5.2f (%5.1f) ceiling %5.2f: %.2fx\n", b, s4, m4, c4, s4/c4, s64, m64, c64, s64/c64}' $f
done
