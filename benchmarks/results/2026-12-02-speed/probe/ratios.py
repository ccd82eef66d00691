import json,sys,statistics,glob,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'-raw-*.txt')):
    mode,bin_=f[:-4].split('/')[-1].split('-')[-2:]
    for line in open(f):
        if line.startswith('{'):
            r=json.loads(line); rows[(mode,bin_,r['hosts'],r['client'])].append(r)
def med(xs): return statistics.median(xs) if xs else float('nan')
print("mode  binary hosts client   n  wall_med  wall_range        client_cpu  sandbox_cpu  load1")
for k in sorted(rows):
    rs=rows[k]; w=[r['wall_s'] for r in rs]
    print(f"{k[0]:5} {k[1]:6} {k[2]:5} {k[3]:8} {len(rs)}  {med(w):7.3f}  {min(w):.3f}-{max(w):.3f}  {med([r['cpu_s'] for r in rs]):9.2f}  {med([r['sandbox_cpu_s'] for r in rs]):10.2f}  {med([r['load1'] for r in rs]):5.1f}")
print()
print("pairwise ratios gpulayer/peer (median over runs)")
for mode in ('idle','busy'):
  for bin_ in ('before','after'):
    for hosts in sorted({k[2] for k in rows if k[0]==mode}):
      g=rows.get((mode,bin_,hosts,'gpulayer'),[])
      for peer in ('openssh','pssh'):
        p=rows.get((mode,bin_,hosts,peer),[])
        if not g or not p: continue
        byrun={r['run']:r['wall_s'] for r in p}
        ratios=[r['wall_s']/byrun[r['run']] for r in g if r['run'] in byrun]
        print(f"{mode} {bin_} {hosts} vs {peer}: {med(ratios):.3f} ({', '.join(f'{x:.2f}' for x in ratios)})")
