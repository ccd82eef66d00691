#!/bin/bash
# Finer alternation than run.sh: for each case, old.test then new.test back
# to back, ROUNDS times, so that both see the same minute's load.
# Usage: pairs.sh ROUNDS BENCHTIME > pairs.txt
set -u
cd "$(dirname "$0")/../../../../placement"
cases=('BenchmarkSchedule$/^workers=(500|10000)$')
for c in spread4 binpack slices compatible mix racks racks-mix; do cases+=("BenchmarkSchedulePolicies\$/^$c\$/"); done
for c in nvlink nvlink-required nvlink-mix; do cases+=("BenchmarkSchedulePoliciesNVLink\$/^$c\$/"); done
for r in $(seq 1 "$1"); do
  for c in "${cases[@]}"; do
    for v in old new; do
      echo "# round $r $v loadavg $(cat /proc/loadavg)"
      /tmp/sched/$v.test -test.run XXX -test.bench "$c" -test.benchtime "$2" 2>&1 | grep -E '^Benchmark' | sed "s/^/$v /"
    done
  done
done
