import re, sys, statistics as st
from collections import defaultdict
rows = defaultdict(lambda: defaultdict(list))
cur = None
for line in open(sys.argv[1]):
    m = re.match(r'# round (\d+) (\S+):', line)
    if m:
        cur = m.group(2); continue
    if line.startswith('Benchmark') and cur:
        f = line.split()
        name = re.sub(r'-2$', '', f[0])
        vals = {}
        for i in range(2, len(f) - 1, 2):
            vals[f[i+1]] = float(f[i])
        for k, v in vals.items():
            rows[(name, cur)][k].append(v)
bins = sys.argv[2].split(',')
names = []
for (n, b) in rows:
    if n not in names: names.append(n)
def med(n, b, k):
    v = rows.get((n, b), {}).get(k)
    return (st.median(v), min(v), max(v), len(v)) if v else None
print('| benchmark | ' + ' | '.join(f'{b} wall ms (min-max)' for b in bins) + ' | ' + ' | '.join(f'{b} proc CPU ms' for b in bins) + ' | final/base wall | final/base proc CPU | ' + ' | '.join(f'{b} MB/op, allocs' for b in bins) + ' |')
print('|' + '---|' * (1 + 4 * len(bins) - len(bins) + 2 + len(bins) - len(bins)))
for n in names:
    cells = []
    for b in bins:
        r = med(n, b, 'ns/op'); cells.append(f'{r[0]/1e6:.1f} ({r[1]/1e6:.1f}-{r[2]/1e6:.1f})' if r else '')
    for b in bins:
        r = med(n, b, 'proc-cpu-ns/op'); cells.append(f'{r[0]/1e6:.1f}' if r else '')
    a, c = med(n, 'base', 'ns/op'), med(n, 'final', 'ns/op')
    cells.append(f'{c[0]/a[0]:.2f}' if a and c else '')
    a, c = med(n, 'base', 'proc-cpu-ns/op'), med(n, 'final', 'proc-cpu-ns/op')
    cells.append(f'{c[0]/a[0]:.2f}' if a and c else '')
    for b in bins:
        r1, r2 = med(n, b, 'B/op'), med(n, b, 'allocs/op')
        cells.append(f'{r1[0]/1e6:.2f}, {r2[0]/1e3:.1f}k' if r1 else '')
    print(f'| {n} | ' + ' | '.join(cells) + ' |')
print()
for n in names:
    for b in bins:
        r = med(n, b, 'cpu-ns/op')
        if r: print(f'{n} {b} thread cpu median {r[0]/1e6:.1f} ms n={r[3]}')
