#!/bin/bash
# Instructions per Schedule call, without GC (GOGC=off) or a second P
# spinning for work (GOMAXPROCS=1), and independent of
# the machine's load: cachegrind counts the instructions of the same
# benchmark run for N and 3N calls, and the difference over 2N is one
# call's. Usage: instructions.sh N > instructions.txt (old.test and
# new.test in /tmp/s2, as for pairs.sh).
set -u
cd "$(dirname "$0")/../../../../placement"
count() {
  GOMAXPROCS=1 GOGC=off valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$1" -test.run XXX -test.bench "$2" -test.benchtime "$3x" 2>&1 |
    awk '/I *refs/ {gsub(",", "", $NF); print $NF}'
}
n=$1
for b in 'BenchmarkSchedule$/^workers=500$' \
  'BenchmarkSchedulePolicies$/^spread4$/workers=500$' 'BenchmarkSchedulePolicies$/^binpack$/workers=500$' \
  'BenchmarkSchedulePolicies$/^slices$/workers=500$' 'BenchmarkSchedulePolicies$/^compatible$/workers=500$' \
  'BenchmarkSchedulePolicies$/^mix$/workers=500$' 'BenchmarkSchedulePolicies$/^racks$/workers=500$' \
  'BenchmarkSchedulePolicies$/^racks-mix$/workers=500$' 'BenchmarkSchedulePoliciesNVLink$/^nvlink$/workers=500$' \
  'BenchmarkSchedulePoliciesNVLink$/^nvlink-required$/workers=500$' 'BenchmarkSchedulePoliciesNVLink$/^nvlink-mix$/workers=500$'; do
  for v in old new; do
    a=$(count /tmp/s2/$v.test "$b" "$n")
    c=$(count /tmp/s2/$v.test "$b" $((3 * n)))
    echo "$v $b $(( (c - a) / (2 * n) )) instructions/op"
  done
done
