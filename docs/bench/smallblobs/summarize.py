#!/usr/bin/env python3
"""Summarize run.sh's JSON: per case and server, MiB/s per round and its median, the
median server CPU-s/GiB (and its kernel part), the highest peak RSS, and ratios against
bb-storage and against the ceiling."""
import json, glob, os, statistics, sys
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, '*-r*.json'))):
    server = os.path.basename(f).split('-r')[0]
    run = json.load(open(f))
    for r in run['results']:
        key = (r['size'], run['settings']['concurrency'])
        s = r['server']
        mib = r['bytes'] / (r['wall_ns'] / 1e9) / (1 << 20)
        rows.setdefault(key, {}).setdefault(server, []).append((mib, s['cpu_seconds_per_gib'], s['system_cpu_seconds_per_gib'], s['peak_rss_bytes']))
names = {'packs': 'membuf (packs)', 'files': 'membuf --pack-max 0', 'bb': 'bb-storage', 'ceiling': 'membuf ceiling'}
def size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
print("| blob | C | server | MiB/s (rounds) | median | CPU-s/GiB (kernel) | peak RSS | MiB/s vs bb-storage | CPU/GiB vs bb-storage | CPU/GiB vs ceiling |")
print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for key in sorted(rows):
    med = {}
    for server, v in rows[key].items():
        med[server] = (statistics.median([x[0] for x in v]), statistics.median([x[1] for x in v]))
    for server in ('packs', 'files', 'bb', 'ceiling'):
        v = rows[key].get(server)
        if not v:
            continue
        mibs = [x[0] for x in v]
        m, cpu = med[server]
        ker = statistics.median([x[2] for x in v])
        rss = max(x[3] for x in v) / (1 << 20)
        vb = f"{m / med['bb'][0]:.2f}x" if 'bb' in med else ''
        cb = f"{cpu / med['bb'][1]:.2f}x" if 'bb' in med else ''
        cc = f"{cpu / med['ceiling'][1]:.2f}x" if 'ceiling' in med else ''
        print(f"| {size(key[0])} | {key[1]} | {names[server]} | {', '.join(f'{x:.0f}' for x in mibs)} | {m:.0f} | {cpu:.2f} ({ker:.2f}) | {rss:.0f} MiB | {vb} | {cb} | {cc} |")
