#!/bin/sh
# Builds what run.sh runs: gpulayer and the benchmarks from the checkout
# at SRC (main), and, as apply's -before, gpulayer at 8e3a8c0 (main
# before the launch changes of this round).
set -eu
R=${R:-/tmp/rec3}
SRC=${SRC:-/work/main}
mkdir -p "$R"
cd "$SRC"
go build -o "$R/gpulayer" ./cmd/gpulayer
go build -o "$R/benchapply" ./benchmarks/apply
go build -o "$R/benchprobe" ./benchmarks/probe
go test -c -o "$R/reconcile.test" ./reconcile
[ -x "$R/gpulayer-before" ] || {
	git worktree add -q /tmp/wt-before3 8e3a8c0
	(cd /tmp/wt-before3 && go build -o "$R/gpulayer-before" ./cmd/gpulayer)
	git worktree remove --force /tmp/wt-before3
}
