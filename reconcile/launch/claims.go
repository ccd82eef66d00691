package launch

import (
	"strconv"
	"strings"
)

// ClaimsDir is where a machine keeps one claim file per GPU, relative to
// the remote user's home: ClaimsDir/GPU-UUID (or index-N where the probe
// did not know the GPU's UUID). A claim names who holds the GPU:
//
//	v1 LINEAGE JOB RUN_ID RANK PID START_TIME
//
// LINEAGE is the state's lineage (one configuration), PID and START_TIME
// the process that holds it: the launch script while it starts the node,
// then the node's leader. A claim is live while that process runs (same
// start time); a claim whose process is gone is stale and is taken over.
// Claims are checked and written under an flock(1) lock on
// ClaimsDir/.lock, so two launches on one machine, of one configuration or
// of two, never both take a GPU: the second fails, naming the first.
const ClaimsDir = ".gpulayer/claims"

// ClaimName is the file a GPU's claim is kept in: its UUID when it is
// known and safe as a file name (the UUID comes from the machine), else
// its index.
func ClaimName(index int, uuid string) string {
	if uuid != "" && len(uuid) <= 96 && strings.Trim(uuid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == "" && uuid[0] != '-' {
		return uuid
	}
	return "index-" + strconv.Itoa(index)
}

// claimScript takes a node's claims and starts its leader, in a sh of its
// own (a real process even where the launch script is interpreted
// in-process, so that its pid can hold the claims while it starts the
// node):
//
//	sh -c claimScript gpulayer-claim LOG PORT LINEAGE JOB RUN RANK NAME INDEX...
//
// Under an flock(1) lock on ClaimsDir/.lock it checks every GPU's claim
// before writing any, so a node claims all its GPUs or none; writes them
// naming itself; starts the leader (startLeader, which the launch script
// supplies, reading $gpulayer_log and $gpulayer_port); writes them again
// naming the leader; and prints `gpulayer-started PID`. Otherwise it
// prints gpulayer-launch:error claimed|claim ... and exits 1. The lock is
// released when it exits; the leader does not inherit it. A message
// carries what another claim says; the caller sanitizes it.
func claimScript(startLeader string) string {
	return claimPrelude + startLeader + claimEpilogue
}

const claimPrelude = `gpulayer_log=$1 gpulayer_port=$2 lineage=$3 job=$4 run=$5 rank=$6
shift 6
dir="$HOME/.gpulayer/claims"
fail() {
	printf 'gpulayer-launch:error %s %s\n' "$1" "$2"
	exit 1
}
exec 9>>"$dir/.lock" || fail claim "cannot open $dir/.lock"
flock -w 10 9 || fail claim "another launch held $dir/.lock for 10 s"
# startof PID sets started to the start time of PID (field 22 of its
# stat), or fails when it is gone or a zombie.
startof() {
	started=
	IFS= read -r st </proc/$1/stat 2>/dev/null || return 1
	st=${st##*\) }
	case $st in Z* | X*) return 1 ;; esac
	# shellcheck disable=SC2086
	set -- $st
	shift 19
	started=$1
}
# check NAME INDEX fails, saying who holds it, when the GPU's claim is
# live and not this node's own (a launch tried again).
check() {
	f="$dir/$1"
	[ -e "$f" ] || return 0
	[ -f "$f" ] || fail claimed "$f is not a regular file"
	name=$1 index=$2 line=
	IFS= read -r line <"$f" || :
	# shellcheck disable=SC2086
	set -- $line
	[ "$1" = v1 ] && [ $# -eq 7 ] || return 0
	[ "$2" = "$lineage" ] && [ "$4" = "$run" ] && [ "$5" = "$rank" ] && return 0
	case $6 in '' | *[!0-9]*) return 0 ;; esac
	startof "$6" && [ "$started" = "$7" ] || return 0
	fail claimed "GPU $index ($name) is claimed by job $3 (run $4, node $5) of state $2, whose process $6 still runs"
}
# claim HOLDER START NAME INDEX... writes every claim naming HOLDER.
claim() {
	holder=$1 holder_start=$2
	shift 2
	while [ $# -ge 2 ]; do
		{ printf 'v1 %s %s %s %s %s %s\n' "$lineage" "$job" "$run" "$rank" "$holder" "$holder_start" >"$dir/.$1.$$" &&
			mv -f "$dir/.$1.$$" "$dir/$1"; } || fail claim "cannot write $dir/$1"
		shift 2
	done
}
all="$*"
while [ $# -ge 2 ]; do
	check "$1" "$2"
	shift 2
done
startof $$ || fail claim 'cannot read its own start time'
# shellcheck disable=SC2086
claim $$ "$started" $all
`

const claimEpilogue = `gpulayer_pid=$!
# The leader may have ended already; then its claims are stale at once.
startof "$gpulayer_pid" || started=0
# shellcheck disable=SC2086
claim "$gpulayer_pid" "$started" $all
printf 'gpulayer-started %s\n' "$gpulayer_pid"
`
