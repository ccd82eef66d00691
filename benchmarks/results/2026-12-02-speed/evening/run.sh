#!/bin/sh
cd /tmp/qb
echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" > apply.txt
./benchapply -hosts 64 -rounds 5 -gpulayer /tmp/qb/gpulayer >> apply.txt 2> apply-stderr.txt
echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> apply.txt
echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" > probe.txt
./benchprobe -sizes 100,500 -runs 5 -floor=false >> probe.txt 2> probe-stderr.txt
echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> probe.txt
cd /work/wt-int/reconcile
echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" > /tmp/qb/plan.txt
/tmp/qb/reconcile.test -test.run XXX -test.bench 'BenchmarkPlan' -test.benchtime 20x -test.count 5 >> /tmp/qb/plan.txt 2>&1
echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> /tmp/qb/plan.txt
cd /work/wt-int/placement
echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" > /tmp/qb/schedule.txt
/tmp/qb/placement.test -test.run XXX -test.bench 'BenchmarkSchedule$|BenchmarkSchedulePoliciesNVLink' -test.benchtime 0.5s -test.count 5 >> /tmp/qb/schedule.txt 2>&1
echo "# $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> /tmp/qb/schedule.txt
echo done > /tmp/qb/finished
