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

// claimScript is the part of a launch script that takes a node's claims
// and starts its leader: the script's own shell runs it (it is a real
// process: it starts the leader as a background job and reads its pid,
// which no in-process interpreter gives, and flock(1) locks its
// descriptor 9, which only a real shell hands a command), so no second
// sh and no command substitution is forked for it. It reads $gpulayer_lineage, $gpulayer_job,
// $gpulayer_run, $gpulayer_rank and $gpulayer_gpus (NAME INDEX pairs,
// split by blanks: a ClaimName has none), and sets $gpulayer_pid to the leader's.
//
// Under an flock(1) lock on ClaimsDir/.lock it checks every GPU's claim
// before writing any, so a node claims all its GPUs or none; starts the
// leader (startLeader, which reads $gpulayer_log and $gpulayer_port);
// writes the claims naming the leader; and releases the lock (closes the
// descriptor: the leader does not inherit it). Where the leader starts
// through perl ($gpulayer_perl), perl does all of it itself, with the
// same rules and messages (leaderPl): it takes the lock (flock(2), no
// flock(1) process), checks, writes the claims naming itself (it becomes
// the leader) and releases the lock before the command starts; this
// shell then takes no lock and checks nothing. The claims are written
// only once the leader runs: another launch can read them only under the
// lock, which this one holds from its check to its write, so there is no
// moment a claim naming a process that is not the node's must cover.
// Otherwise it prints gpulayer-launch:error claimed|claim ... and exits
// 1. A message carries what another claim says; the caller sanitizes it.
func claimScript(startLeader string) string {
	return claimPrelude + startLeader + claimEpilogue
}

const claimPrelude = `gpulayer_claims="$HOME/.gpulayer/claims"
# gpulayer_startof PID sets gpulayer_started to the start time of PID
# (field 22 of its stat), or fails when it is gone or a zombie.
gpulayer_startof() {
	gpulayer_started=
	IFS= read -r gpulayer_st </proc/$1/stat 2>/dev/null || return 1
	gpulayer_st=${gpulayer_st##*\) }
	case $gpulayer_st in Z* | X*) return 1 ;; esac
	# shellcheck disable=SC2086
	set -- $gpulayer_st
	shift 19
	gpulayer_started=$1
}
# gpulayer_check NAME INDEX fails, saying who holds it, when the GPU's
# claim is live and not this node's own (a launch tried again).
gpulayer_check() {
	gpulayer_f="$gpulayer_claims/$1"
	[ -e "$gpulayer_f" ] || return 0
	[ -f "$gpulayer_f" ] || gpulayer_fail claimed "$gpulayer_f is not a regular file"
	gpulayer_name=$1 gpulayer_index=$2 gpulayer_line=
	IFS= read -r gpulayer_line <"$gpulayer_f" || :
	# shellcheck disable=SC2086
	set -- $gpulayer_line
	[ "$1" = v1 ] && [ $# -eq 7 ] || return 0
	[ "$2" = "$gpulayer_lineage" ] && [ "$4" = "$gpulayer_run" ] && [ "$5" = "$gpulayer_rank" ] && return 0
	case $6 in '' | *[!0-9]*) return 0 ;; esac
	gpulayer_startof "$6" && [ "$gpulayer_started" = "$7" ] || return 0
	gpulayer_fail claimed "GPU $gpulayer_index ($gpulayer_name) is claimed by job $3 (run $4, node $5) of state $2, whose process $6 still runs"
}
# gpulayer_claim HOLDER START NAME INDEX... writes every claim naming
# HOLDER, each to a file of its own renamed into place.
gpulayer_claim() {
	gpulayer_holder=$1 gpulayer_holder_start=$2
	shift 2
	while [ $# -ge 2 ]; do
		{ printf 'v1 %s %s %s %s %s %s\n' "$gpulayer_lineage" "$gpulayer_job" "$gpulayer_run" "$gpulayer_rank" "$gpulayer_holder" "$gpulayer_holder_start" >"$gpulayer_claims/.$1.$$" &&
			mv -f "$gpulayer_claims/.$1.$$" "$gpulayer_claims/$1"; } || gpulayer_fail claim "cannot write $gpulayer_claims/$1"
		shift 2
	done
}
# perl takes the lock and checks the claims itself (leaderPl).
if [ -z "$gpulayer_perl" ]; then
	exec 9>>"$gpulayer_claims/.lock" || gpulayer_fail claim "cannot open $gpulayer_claims/.lock"
	flock -w 10 9 || gpulayer_fail claim "another launch held $gpulayer_claims/.lock for 10 s"
	# shellcheck disable=SC2086 # NAME INDEX pairs (ClaimName: no blank, no glob)
	set -- $gpulayer_gpus
	while [ $# -ge 2 ]; do
		gpulayer_check "$1" "$2"
		shift 2
	done
fi
`

const claimEpilogue = `# perl's leader wrote its claims itself.
if [ -z "$gpulayer_perl" ]; then
	# The leader may have ended already; then its claims are stale at once.
	gpulayer_startof "$gpulayer_pid" || gpulayer_started=0
	# shellcheck disable=SC2086
	gpulayer_claim "$gpulayer_pid" "$gpulayer_started" $gpulayer_gpus
fi
exec 9>&-
`
