#!/bin/bash
# For each case, old.test (main at 7d0aebf) then new.test (this branch)
# back to back, ROUNDS times, so that both see the same minute's load.
# Both are `go test -c` binaries of ./placement in /tmp/s2.
# Usage: pairs.sh ROUNDS BENCHTIME > pairs.txt
set -u
cd "$(dirname "$0")/../../../../placement"
cases=('BenchmarkSchedule$/^workers=(500|10000)$')
for c in spread4 binpack slices compatible mix racks racks-mix; do cases+=("BenchmarkSchedulePolicies\$/^$c\$/"); done
for c in nvlink nvlink-required nvlink-mix; do cases+=("BenchmarkSchedulePoliciesNVLink\$/^$c\$/"); done
for r in $(seq 1 "$1"); do
  for c in "${cases[@]}"; do
    for v in old new; do
      echo "# round $r $v loadavg $(cat /proc/loadavg) $(date -u +%H:%M:%S)"
      /tmp/s2/$v.test -test.run XXX -test.bench "$c" -test.benchtime "$2" 2>&1 | grep -E '^Benchmark' | sed "s/^/$v /"
    done
  done
done
