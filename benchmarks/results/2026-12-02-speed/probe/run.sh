#!/bin/sh
# One session: before (main + this harness) and after (branch), one after the
# other for each mode (round 2: the same with "for bin in after before").
cd /tmp/res
for mode in idle busy; do
  for bin in before after; do
    if [ $mode = idle ]; then args="-sizes 100,500 -runs 3 -floor=false"; else args="-sizes 64,500 -runs 3 -floor=false -busy"; fi
    echo "### $bin $mode: bench-$bin $args" >> raw-$mode-$bin.txt
    echo "# $(date -u +%FT%TZ) $(uptime)" >> raw-$mode-$bin.txt
    /tmp/bench-$bin $args >> raw-$mode-$bin.txt 2>> stderr-$mode-$bin.txt
    echo "# $(date -u +%FT%TZ) $(uptime)" >> raw-$mode-$bin.txt
  done
done
echo done > /tmp/res/finished
