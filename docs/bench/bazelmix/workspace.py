#!/usr/bin/env python3
"""Writes a Bazel workspace of genrules with the Bazel size mix into DIR:
70% of outputs 1-16 KiB, 25% 16 KiB-1 MiB, 5% 1-8 MiB (log-uniform within
each band), a quarter of the rules consuming another rule's output. No
external repositories. Outputs come from /dev/urandom: a cold build makes
new blobs, a rebuild after `bazel clean` gets them back from the cache.

    workspace.py DIR [RULES]   (default 1500 rules, seed 20)
"""
import math, os, random, sys

d = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
r = random.Random(20)
os.makedirs(d, exist_ok=True)
open(os.path.join(d, "WORKSPACE"), "w").write('workspace(name = "bazelmix")\n')

def size():
    u = r.random()
    lo, hi = (1 << 10, 16 << 10) if u < 0.70 else (16 << 10, 1 << 20) if u < 0.95 else (1 << 20, 8 << 20)
    return int(math.exp(r.uniform(math.log(lo), math.log(hi))))

out = []
for i in range(n):
    s = size()
    if i > 0 and r.random() < 0.25:
        j = r.randrange(i)
        out.append(f'genrule(name = "g{i}", srcs = [":g{j}"], outs = ["g{i}.out"], '
                   f'cmd = "head -c {s} /dev/urandom > $@ && head -c 4096 $(location :g{j}) >> $@")\n')
    else:
        out.append(f'genrule(name = "g{i}", outs = ["g{i}.out"], cmd = "head -c {s} /dev/urandom > $@")\n')
open(os.path.join(d, "BUILD"), "w").write("".join(out))
