#!/usr/bin/env python3
"""perround.py OUT: run.sh's rounds one by one: membuf (packs) against bb-storage and the ceiling, per round, at 4 KiB and 64 KiB."""
import glob, json, sys
out=sys.argv[1]
R={}
for p in glob.glob(out+'/*-r*.json'):
    name=p.rsplit('/',1)[1][:-5]; srv,r=name.rsplit('-r',1)
    for x in json.load(open(p))['results']:
        R[(srv,int(r),x['label'])]=(x['server']['cpu_seconds_per_gib'],x['mb_per_sec'])
for size in ['4 KiB','64 KiB']:
    for r in (1,2,3):
        p,b,c=R[('packs',r,size)],R[('bb',r,size)],R[('ceiling',r,size)]
        print(f"{size} r{r}: packs {p[0]:.2f}@{p[1]:.0f}  bb {b[0]:.2f}@{b[1]:.0f}  ceiling {c[0]:.2f}@{c[1]:.0f}  cpu/bb {p[0]/b[0]:.2f}x cpu/ceiling {p[0]/c[0]:.2f}x tput/bb {p[1]/b[1]:.2f}x")
