#!/bin/bash
# CPU only, gpulayer's client only: one sandbox of 500 machines per
# binary (benchprobe serve), PROBES (3) probes with `benchprobe client`, before and
# after alternating, ROUNDS (2) rounds. Prints each probe's wall and the client's
# user/system CPU (GNU time), the sandbox's CPU over the 3 probes in
# clock ticks (10 ms, /proc/PID/stat utime+stime) and its peak RSS.
for round in $(seq 1 "${ROUNDS:-2}"); do
	for which in ${WHICH:-before after}; do
		BIN=/tmp/probe2-$which/benchprobe
		D=$(mktemp -d /tmp/gpulayer-cpuab2-XXXX)
		mkfifo "$D/fifo"
		$BIN serve -hosts 500 -dir "$D" > "$D/fifo" &
		SP=$!
		read -r line < "$D/fifo"
		echo "== round $round $which ($line) $(date -u +%FT%TZ) $(cat /proc/loadavg)"
		$BIN client -dir "$D" > /dev/null # warm-up, unmeasured
		s0=$(awk '{print $14+$15}' /proc/$SP/stat)
		for i in $(seq 1 "${PROBES:-3}"); do
			/usr/bin/time -f "client: %e s wall, %U s user, %S s system" $BIN client -dir "$D" > /dev/null
		done
		s1=$(awk '{print $14+$15}' /proc/$SP/stat)
		echo "sandbox: $((s1 - s0)) ticks over ${PROBES:-3} probes; $(grep VmHWM /proc/$SP/status)"
		kill -TERM $SP
		wait $SP
		rm -rf "$D"
	done
done
echo "== end $(date -u +%FT%TZ) $(cat /proc/loadavg)"
