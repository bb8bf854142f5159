#!/usr/bin/env python3
"""Summarize run.sh's results.txt: per server and phase, Bazel's wall time and the
server's CPU seconds per round (and per 1,000 actions), peak RSS, and ratios of the
medians against bb-storage."""
import re, statistics, sys
rows = {}
rss = {}
for line in open(sys.argv[1] + "/results.txt"):
    m = re.match(r"(\w+) (\d+) (cold|warm) wall=([\d.]+) cpu_ticks=(\d+) INFO: (\d+) processes", line)
    if m:
        s, r, ph, wall, ticks, procs = m.groups()
        rows.setdefault((s, ph), []).append((float(wall), int(ticks) / 100, int(procs)))
        continue
    m = re.match(r"(\w+) (\d+) peak_rss_kib=(\d+)", line)
    if m:
        rss.setdefault(m.group(1), []).append(int(m.group(3)) / 1024)
names = {"membuf": "membuf", "bb": "bb-storage", "alt": "alt"}
base = "bb" if any(s == "bb" for s, _ in rows) else "membuf"
print(f"| phase | server | wall s (rounds) | server CPU-s (rounds) | CPU-s per 1,000 actions (median) | peak RSS MiB (rounds) | wall vs {names[base]} | CPU vs {names[base]} |")
print("| --- | --- | --- | --- | ---: | --- | ---: | ---: |")
for ph in ("cold", "warm"):
    med = {s: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for (s, p), v in rows.items() if p == ph}
    for s in ("membuf", "alt", "bb"):
        v = rows.get((s, ph))
        if not v:
            continue
        actions = v[0][2] - 1
        w, c = med[s]
        rw = f"{w / med[base][0]:.2f}x" if base in med else ""
        rc = f"{c / med[base][1]:.2f}x" if base in med else ""
        print(f"| {ph} | {names[s]} | {', '.join(f'{x[0]:.1f}' for x in v)} | {', '.join(f'{x[1]:.2f}' for x in v)} | {c * 1000 / actions:.2f} | {', '.join(f'{x:.0f}' for x in rss.get(s, []))} | {rw} | {rc} |")
