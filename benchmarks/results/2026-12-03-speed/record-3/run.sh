#!/bin/sh
# The run of record after the launch changes (issue 19): apply and
# destroy against pdsh (start_check 0 as pdsh; -check: the default 300 ms;
# -before: main at 8e3a8c0), the 500-host probe, BenchmarkPlan; one script
# on a machine with nothing else running. Each file starts and ends with
# the time and /proc/loadavg.
set -u
R=${R:-/tmp/rec3}
OUT=${OUT:-$R/out}
SRC=${SRC:-/work/main}
mkdir -p "$OUT"
stamp() { echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)"; }
cd "$R" || exit 1

stamp >"$OUT/apply.txt"
./benchapply -hosts 64 -rounds 7 -check -gpulayer "$R/gpulayer" -before "$R/gpulayer-before" >>"$OUT/apply.txt" 2>"$OUT/apply-stderr.txt"
stamp >>"$OUT/apply.txt"

stamp >"$OUT/probe.txt"
./benchprobe -sizes 100,500 -runs 5 -floor=false >>"$OUT/probe.txt" 2>"$OUT/probe-stderr.txt"
stamp >>"$OUT/probe.txt"

cd "$SRC/reconcile" || exit 1
stamp >"$OUT/plan.txt"
"$R/reconcile.test" -test.run XXX -test.bench 'BenchmarkPlan' -test.benchtime 20x -test.count 5 >>"$OUT/plan.txt" 2>&1
stamp >>"$OUT/plan.txt"
echo done >"$OUT/finished"
