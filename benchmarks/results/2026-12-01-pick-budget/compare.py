#!/usr/bin/env python3
"""Per group of layouts (benchmark, GPU count): medians of each sub-benchmark before and after, their geometric-mean ratio, and the worst ratio. python3 compare.py before.txt after.txt [min] (min: best run instead of the median)."""
import collections, re, statistics, sys
def load(path):
    runs = collections.defaultdict(list)
    for line in open(path):
        m = re.match(r"(Benchmark\S+)-\d+\s+\d+\s+([\d.]+) ns/op", line)
        if m: runs[m.group(1)].append(float(m.group(2)))
    pick = min if len(sys.argv) > 3 and sys.argv[3] == "min" else statistics.median
    return {k: pick(v) for k, v in runs.items()}
b, a = load(sys.argv[1]), load(sys.argv[2])
def gpus(name):
    parts = name.split("/")
    if parts[0].endswith("Random16"): return 16
    m = re.match(r"(\d+)x", parts[1]) or re.search(r"-(\d+)x-", parts[1]) or re.search(r"(\d+)x", parts[1])
    return int(m.group(1)) if m else 0
groups = collections.defaultdict(list)
for k in b:
    if k in a:
        groups[(k.split("/")[0], gpus(k))].append((a[k]/b[k], k, b[k], a[k]))
print(f"{'benchmark':26} {'GPUs':>4} {'cases':>5} {'median before':>13} {'median after':>12} {'geomean after/before':>20} {'worst ratio':>11}")
import math
for (bench, g), rs in sorted(groups.items()):
    gm = math.exp(sum(math.log(r[0]) for r in rs)/len(rs))
    w = max(rs)
    print(f"{bench:26} {g:4d} {len(rs):5d} {statistics.median(r[2] for r in rs):13.0f} {statistics.median(r[3] for r in rs):12.0f} {gm:20.3f} {w[0]:11.2f}  ({w[1].split('/',1)[1]}: {w[2]:.0f} -> {w[3]:.0f})")
