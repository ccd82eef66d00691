# ratios.py: medians and ratios of run.sh's raw files (roundN-{before,after}.txt).
# gpulayer's wall time, CPU (client with children; the sandbox process's),
# and the run-by-run ratio gpulayer / parallel-ssh and / OpenSSH ssh.
import json, sys, statistics, glob, collections

rows = collections.defaultdict(list)
for f in sorted(glob.glob('round*-*.txt')):
    if f.endswith('-stderr.txt'):
        continue
    rnd, which = f[:-4].split('-')
    for line in open(f):
        if line.startswith('{'):
            r = json.loads(line)
            rows[(rnd, which, r['hosts'], r['client'])].append(r)

med = statistics.median
print("round   binary hosts client    n  wall_med  wall_range     client_cpu  sandbox_cpu  cpu_sum  load1")
for k in sorted(rows):
    rs = rows[k]
    w = [r['wall_s'] for r in rs]
    cc, sc = med([r['cpu_s'] for r in rs]), med([r['sandbox_cpu_s'] for r in rs])
    print(f"{k[0]:7} {k[1]:6} {k[2]:5} {k[3]:8} {len(rs)}  {med(w):7.3f}  {min(w):.3f}-{max(w):.3f}  {cc:9.2f}  {sc:10.2f}  {cc+sc:7.2f}  {med([r['load1'] for r in rs]):5.1f}")
print()
print("gpulayer / peer, run by run (median, then each run)")
for k in sorted(rows):
    rnd, which, hosts, client = k
    if client != 'gpulayer':
        continue
    for peer in ('pssh', 'openssh'):
        byrun = {r['run']: r['wall_s'] for r in rows.get((rnd, which, hosts, peer), [])}
        ratios = [r['wall_s'] / byrun[r['run']] for r in rows[k] if r['run'] in byrun]
        if ratios:
            print(f"{rnd} {which:6} {hosts:4} vs {peer:7}: {med(ratios):.3f} ({', '.join(f'{x:.2f}' for x in ratios)})")
print()
print("after / before, gpulayer, per round (medians)")
for rnd in sorted({k[0] for k in rows}):
    for hosts in sorted({k[2] for k in rows}):
        b, a = rows.get((rnd, 'before', hosts, 'gpulayer')), rows.get((rnd, 'after', hosts, 'gpulayer'))
        if not a or not b:
            continue
        for name, f in (('wall', lambda r: r['wall_s']), ('client cpu', lambda r: r['cpu_s']), ('sandbox cpu', lambda r: r['sandbox_cpu_s'])):
            print(f"{rnd} {hosts:4} {name:12}: {med(map(f, b)):.2f} -> {med(map(f, a)):.2f}  ({med(map(f, a)) / med(map(f, b)):.2f}x)")
