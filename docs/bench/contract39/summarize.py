#!/usr/bin/env python3
"""summarize.py OUT: ab.sh's blobs runs as a table: per case, each round's
server CPU-s/GiB for old and new and their ratio, the median ratio, and the
highest peak RSS of each."""
import glob, json, statistics, sys

out = sys.argv[1]
runs = {}  # (which, round) -> {case: result}
for path in glob.glob(f"{out}/blobs-*-*.json"):
    which, rnd = path.rsplit("/", 1)[1][len("blobs-"):-len(".json")].split("-")
    for r in json.load(open(path))["results"]:
        runs.setdefault((which, int(rnd)), {})[f"{r['mode']} {r['label']}"] = r
rounds = sorted({r for _, r in runs})
cases = list(next(iter(runs.values())).keys())
print("| case | " + " | ".join(f"round {r}: old / new CPU-s/GiB (new/old)" for r in rounds) + " | median new/old | MiB/s new/old (median) | peak RSS old / new |")
print("|---|" + "---|" * (len(rounds) + 3))
for c in cases:
    cells, ratios, tput = [], [], []
    rss = {"old": 0, "new": 0}
    for r in rounds:
        o, n = runs[("old", r)][c], runs[("new", r)][c]
        co, cn = o["server"]["cpu_seconds_per_gib"], n["server"]["cpu_seconds_per_gib"]
        ratios.append(cn / co)
        tput.append(n["mb_per_sec"] / o["mb_per_sec"])
        cells.append(f"{co:.2f} / {cn:.2f} ({cn / co:.2f}x)")
        for w, x in (("old", o), ("new", n)):
            rss[w] = max(rss[w], x["server"]["peak_rss_bytes"])
    print(f"| {c} | " + " | ".join(cells) + f" | {statistics.median(ratios):.2f}x | {statistics.median(tput):.2f}x | {rss['old'] / 2**20:.1f} / {rss['new'] / 2**20:.1f} MiB |")
