#!/usr/bin/env python3
"""Summarize run.sh's JSON: per case and server, the median over rounds of MiB/s,
server CPU-s/GiB (and its kernel part), and the highest peak RSS; ratios against membuf."""
import json, glob, os, statistics, sys
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, '*-r*.json'))):
    server = os.path.basename(f).split('-r')[0]
    for r in json.load(open(f))['results']:
        key = (r['size'], r['streams'])
        s = r['server']
        mib = r['bytes'] / (r['wall_ns'] / 1e9) / (1 << 20)
        rows.setdefault(key, {}).setdefault(server, []).append((mib, s['cpu_seconds_per_gib'], s['system_cpu_seconds_per_gib'], s['peak_rss_bytes']))
names = {'membuf': 'membuf', 'br': 'bazel-remote', 'bb': 'bb-storage'}
def size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
print("| blob | C | server | MiB/s (rounds) | median | CPU-s/GiB (kernel) | peak RSS | MiB/s vs membuf | CPU/GiB vs membuf |")
print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |")
for key in sorted(rows):
    base = None
    for server in ('membuf', 'br', 'bb'):
        v = rows[key].get(server)
        if not v:
            continue
        mibs = [x[0] for x in v]
        med = statistics.median(mibs)
        cpu = statistics.median([x[1] for x in v]); ker = statistics.median([x[2] for x in v])
        rss = max(x[3] for x in v) / (1 << 20)
        if server == 'membuf':
            base = (med, cpu)
            rt = rc = ''
        else:
            rt = f"{med / base[0]:.2f}x" if base else ''
            rc = f"{cpu / base[1]:.2f}x" if base else ''
        print(f"| {size(key[0])} | {key[1]} | {names[server]} | {', '.join(f'{m:.0f}' for m in mibs)} | {med:.0f} | {cpu:.2f} ({ker:.2f}) | {rss:.0f} MiB | {rt} | {rc} |")
