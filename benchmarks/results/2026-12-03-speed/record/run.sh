#!/bin/sh
# The run of record of 2026-12-03: main after the day's merges, every
# benchmark of issues 19 and 20 in one script, on a machine with nothing
# else running. Binaries are built first (build.sh); each file starts
# and ends with the time and /proc/loadavg.
set -u
R=${R:-/tmp/rec}
OUT=${OUT:-$R/out}
SRC=${SRC:-/work/main}
mkdir -p "$OUT"
stamp() { echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)"; }
cd "$R" || exit 1

stamp >"$OUT/apply.txt"
./benchapply -hosts 64 -rounds 7 -gpulayer "$R/gpulayer" -before "$R/gpulayer-before" >>"$OUT/apply.txt" 2>"$OUT/apply-stderr.txt"
stamp >>"$OUT/apply.txt"

stamp >"$OUT/probe.txt"
./benchprobe -sizes 100,500 -runs 5 -floor=false >>"$OUT/probe.txt" 2>"$OUT/probe-stderr.txt"
stamp >>"$OUT/probe.txt"

cd "$SRC/reconcile" || exit 1
stamp >"$OUT/plan.txt"
"$R/reconcile.test" -test.run XXX -test.bench 'BenchmarkPlan' -test.benchtime 20x -test.count 5 >>"$OUT/plan.txt" 2>&1
stamp >>"$OUT/plan.txt"

cd "$SRC/placement" || exit 1
stamp >"$OUT/schedule.txt"
"$R/placement.test" -test.run XXX -test.bench 'BenchmarkSchedule$|BenchmarkSchedulePolicies' -test.benchtime 0.5s -test.count 5 >>"$OUT/schedule.txt" 2>&1
stamp >>"$OUT/schedule.txt"
echo done >"$OUT/finished"
