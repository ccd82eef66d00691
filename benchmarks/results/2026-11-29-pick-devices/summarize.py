#!/usr/bin/env python3
"""Medians of bench.txt per sub-benchmark, then the worst median per layout."""
import collections
import re
import statistics
import sys

runs = collections.defaultdict(list)
allocs = {}
for line in open(sys.argv[1] if len(sys.argv) > 1 else "bench.txt"):
    m = re.match(r"(Benchmark\S+)-\d+\s+\d+\s+([\d.]+) ns/op\s+\d+ B/op\s+(\d+) allocs/op", line)
    if m:
        runs[m.group(1)].append(float(m.group(2)))
        allocs[m.group(1)] = int(m.group(3))
layouts = collections.defaultdict(list)
for name, values in runs.items():
    bench, layout, *rest = name.split("/")
    layouts[(bench, layout)].append((statistics.median(values), "/".join(rest), allocs[name], min(values)))
print(f"{'benchmark':24} {'layout':64} {'cases':>5} {'worst median ns':>15}  {'at':18} {'worst best-of-5 ns':>18} {'allocs':>6}")
for (bench, layout), cases in sorted(layouts.items()):
    worst = max(cases)
    print(f"{bench:24} {layout:64} {len(cases):5d} {worst[0]:15.0f}  {worst[1]:18} {max(c[3] for c in cases):18.0f} {max(c[2] for c in cases):6d}")
