#!/bin/bash
# Alternating before/after: test binaries of placement at main 7059594
# (old.test) and at this branch (new.test), built with `go test -c`, run in
# turn for ROUNDS rounds; the load average is printed before each run.
# Usage: run.sh ROUNDS BENCHTIME > schedule.txt
set -u
bench='BenchmarkSchedule$/workers=(500|10000)$|BenchmarkSchedulePolicies$|BenchmarkSchedulePoliciesNVLink$'
cd "$(dirname "$0")/../../../../placement"
for r in $(seq 1 "$1"); do
  for v in old new; do
    echo "# round $r $v loadavg $(cat /proc/loadavg)"
    /tmp/sched/$v.test -test.run XXX -test.bench "$bench" -test.benchtime "$2" 2>&1 | grep -E '^Benchmark' | sed "s/^/$v /"
  done
done
