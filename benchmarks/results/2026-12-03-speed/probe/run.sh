#!/bin/sh
# Before (main at 7059594) and after (this branch), alternating, two
# rounds: benchprobe -sizes 100,500 -runs 5 -floor=false, as
# benchmarks/results/2026-12-02-speed/evening/run.sh runs it. Binaries:
#   /tmp/probe-before/benchprobe  go build ./benchmarks/probe in a worktree of 7059594
#   /tmp/probe-after/benchprobe   go build ./benchmarks/probe on this branch
OUT=${OUT:-.}
for round in 1 2; do
	for which in before after; do
		f="$OUT/round$round-$which.txt"
		echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" > "$f"
		/tmp/probe-$which/benchprobe -sizes 100,500 -runs 5 -floor=false >> "$f" 2> "$OUT/round$round-$which-stderr.txt"
		echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> "$f"
	done
done
