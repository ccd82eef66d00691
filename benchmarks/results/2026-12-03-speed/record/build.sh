#!/bin/sh
# Builds what run.sh runs, from the checkout at SRC (main) and, for
# apply's -before, gpulayer at 7059594 (main before the day's work).
set -eu
R=${R:-/tmp/rec}
SRC=${SRC:-/work/main}
mkdir -p "$R"
cd "$SRC"
go build -o "$R/gpulayer" ./cmd/gpulayer
go build -o "$R/benchapply" ./benchmarks/apply
go build -o "$R/benchprobe" ./benchmarks/probe
go test -c -o "$R/reconcile.test" ./reconcile
go test -c -o "$R/placement.test" ./placement
[ -x "$R/gpulayer-before" ] || {
	git worktree add -q /tmp/wt-before 7059594
	(cd /tmp/wt-before && go build -o "$R/gpulayer-before" ./cmd/gpulayer)
}
