#!/bin/bash
# usage: prof.sh BIN N RUNS TAG
BIN=$1; N=$2; RUNS=$3; TAG=$4
D=$(mktemp -d /tmp/pp/sb-XXXX)
mkfifo $D/fifo
env $SBENV $BIN serve -hosts $N -dir $D -cpuprofile /tmp/pp/$TAG-sb.prof > $D/fifo &
SP=$!
read line < $D/fifo
echo "sandbox: $line"
cat /proc/loadavg
s0=$(awk '{print $14+$15}' /proc/$SP/stat)
for i in $(seq 1 $RUNS); do
  /usr/bin/time -f "%e s wall %U u %S s" $BIN client -impl gpulayer -command probe -dir $D -parallelism 64 -cpuprofile /tmp/pp/$TAG-cl$i.prof
done
s1=$(awk '{print $14+$15}' /proc/$SP/stat)
echo "sandbox ticks: $((s1-s0)) over $RUNS runs"
grep VmHWM /proc/$SP/status; kill -TERM $SP; wait $SP
cat /proc/loadavg
rm -rf $D
