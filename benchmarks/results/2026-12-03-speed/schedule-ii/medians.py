#!/usr/bin/env python3
"""Medians (min-max) of cpu-ns/op per case and binary from pairs.txt, in us,
and new/old. Usage: medians.py pairs.txt"""
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r'(old|new) (Benchmark\S+?)-\d+\s.*?([\d.]+) cpu-ns/op', line)
    if m:
        runs.setdefault(m.group(2), {}).setdefault(m.group(1), []).append(float(m.group(3)) / 1000)
print("| case | old us (median, min-max) | new us (median, min-max) | new/old |")
print("|---|---|---|---|")
for case, v in runs.items():
    o, n = v.get("old", []), v.get("new", [])
    if not o or not n:
        continue
    mo, mn = statistics.median(o), statistics.median(n)
    print(f"| {case.replace('Benchmark', '')} | {mo:.1f} ({min(o):.1f}-{max(o):.1f}) | {mn:.1f} ({min(n):.1f}-{max(n):.1f}) | {mn / mo:.2f} |")
