package launch

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/ssh"
)

// Stop is what stopping the nodes of a run on one machine needs.
type Stop struct {
	// PID and StartTime identify the node's leader process (0 when none
	// was recorded: only the sweep runs).
	PID       int
	StartTime uint64
	// RunID is the job's launch.
	RunID string
	// Ranks are the run's nodes on this machine: every process whose
	// environment carries GPULAYER_NODE_ID=RUN_ID/RANK for one of them is
	// stopped, wherever its session or group, and no other node's. Empty
	// means every process of the run (GPULAYER_RUN_ID=RUN_ID).
	Ranks []int
	// Grace is how long processes get between SIGTERM and SIGKILL.
	Grace time.Duration
	// NoSweep leaves the environment sweep out, and the listing of the
	// group's members: a later stop of the same run, on a machine that
	// shares this one's kernel (same boot id, pid namespace and login),
	// sweeps for this machine's nodes too (its Ranks hold them, its
	// Groups their groups, and its PID is 0: the sweep alone), so the
	// processes are read once per kernel, not once per node. The leader
	// and its tree are still stopped here, and the group is sent SIGTERM
	// as a whole.
	NoSweep bool
	// Groups are the process groups of the nodes whose stops left them
	// to this one (NoSweep): each group's leader as the launch recorded
	// it. A group is still the node's while its leader is that process
	// (same start time), or, once the leader is gone, while the group
	// has members (its id cannot be taken by a new group meanwhile); its
	// live members are stopped here with those the sweep finds.
	Groups []Group
}

// Group is a node's process group, by its leader as the launch recorded
// it.
type Group struct {
	PID       int
	StartTime uint64
}

// NodeID is the value of GPULAYER_NODE_ID, which every process of a node
// inherits: the run and the rank, so that a stop on one machine never
// touches another node's processes where machines share a kernel (the
// sandbox, containers of one host).
func NodeID(runID string, rank int) string { return runID + "/" + strconv.Itoa(rank) }

// StopScript is the sh script that stops a node. The run's processes on
// the machine are:
//
//   - the leader's process group, found by grep in /proc/PID/stat (or
//     pgrep, or a scan of /proc);
//   - the leader's descendants, level by level: the leader is a child
//     subreaper where the machine has perl or python3 (see Script), so every
//     process the command started and orphaned is re-parented to it and
//     stays in its tree whatever it does to its session, group or
//     environment;
//   - every process of the user whose environment holds the node's
//     GPULAYER_NODE_ID (a worker that left the tree on a machine without
//     python3, one started since).
//
// It sends them SIGTERM, waits up to Grace for them to end, checked at
// intervals growing from 10 ms to half a second, then sends SIGKILL to
// what is left. The environment sweep runs once the group and tree are
// gone: reading the environment of processes that are exiting is what
// makes a stop slow on a busy machine. The group and the tree are used
// only when the leader is still the recorded process (same start time);
// a group whose leader is gone is still signalled, since a pid is not
// reused while its process group has members.
//
// Process groups are signalled as `kill -s SIG -- -PGID`, falling back to
// `kill -s SIG -PGID`: dash (Debian's and Ubuntu's /bin/sh) accepts only
// the first, busybox sh only the second, bash both.
//
// The last line it prints is
//
//	gpulayer-stop:ok SIGNALLED KILLED LEFT
//
// SIGNALLED counts the processes sent SIGTERM, KILLED those that needed
// SIGKILL, LEFT those still there at the end (0 unless something refused
// to die).
func StopScript(s Stop) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# gpulayer stop: run %s\n", s.RunID)
	w("gpulayer_pid=%d\n", s.PID)
	w("gpulayer_start=%d\n", s.StartTime)
	w("gpulayer_grace_ms=%d\n", max(0, s.Grace.Milliseconds()))
	if s.NoSweep {
		w("gpulayer_sweeps=\n")
	} else {
		w("gpulayer_sweeps=1\n")
	}
	// The sweep: grep's arguments, every marker quoted.
	w("gpulayer_sweep() { grep -lzxF")
	if len(s.Ranks) == 0 {
		w(" -e %s", ssh.Quote("GPULAYER_RUN_ID="+s.RunID))
	}
	for _, r := range s.Ranks {
		w(" -e %s", ssh.Quote("GPULAYER_NODE_ID="+NodeID(s.RunID, r)))
	}
	w(" /proc/[0-9]*/environ 2>/dev/null; }\n")
	var groups []string
	for _, g := range s.Groups {
		if g.PID > 0 {
			groups = append(groups, strconv.Itoa(g.PID), strconv.FormatUint(g.StartTime, 10))
		}
	}
	w("gpulayer_group_pairs='%s'\n", strings.Join(groups, " "))
	b.WriteString(killpgFunc)
	b.WriteString(sleepMsFunc)
	b.WriteString(stopBody)
	return b.String()
}

// killpgFunc defines gpulayer_killpg SIGNAL PGID, which signals a process
// group (0 only asks whether it exists) in the spelling each shell takes.
const killpgFunc = `gpulayer_killpg() {
	kill -s "$1" -- "-$2" 2>/dev/null || kill -s "$1" "-$2" 2>/dev/null
}
`

// stopBody is the part of every stop script after its values.
const stopBody = `gpulayer_group=
gpulayer_leader=
if [ "$gpulayer_pid" -gt 0 ]; then
	if IFS= read -r gpulayer_stat </proc/$gpulayer_pid/stat 2>/dev/null; then
		gpulayer_stat=${gpulayer_stat##*\) }
		set -- $gpulayer_stat
		shift 19
		if [ "$1" = "$gpulayer_start" ]; then
			gpulayer_group=$gpulayer_pid
			gpulayer_leader=$gpulayer_pid
		fi
	elif gpulayer_killpg 0 "$gpulayer_pid"; then
		gpulayer_group=$gpulayer_pid
	fi
fi
# gpulayer_ours PID START says whether group PID is still the node's
# whose leader was process PID started at START: the leader is that
# process (a zombie included), or it is gone and the group has members.
gpulayer_ours() {
	gpulayer_want=$2
	if IFS= read -r gpulayer_stat </proc/$1/stat 2>/dev/null; then
		gpulayer_stat=${gpulayer_stat##*\) }
		# shellcheck disable=SC2086
		set -- $gpulayer_stat
		shift 19
		[ "$1" = "$gpulayer_want" ]
		return
	fi
	gpulayer_killpg 0 "$1"
}
# The groups of other machines' nodes this stop sweeps for.
gpulayer_other_groups=
# shellcheck disable=SC2086
set -- $gpulayer_group_pairs
while [ $# -ge 2 ]; do
	! gpulayer_ours "$1" "$2" || gpulayer_other_groups="$gpulayer_other_groups $1"
	shift 2
done
gpulayer_pgrep=
command -v pgrep >/dev/null 2>&1 && gpulayer_pgrep=1
gpulayer_grep=
command -v grep >/dev/null 2>&1 && gpulayer_grep=1
gpulayer_children_files=
[ ! -r "/proc/$$/task/$$/children" ] || gpulayer_children_files=1
# The functions below set variables rather than print, so that no
# subshell is forked for them: on a machine stopping many runs at once,
# forks are what a stop costs.
#
# gpulayer_alive PID... sets gpulayer_left to those of the pids that are
# still there and not zombies, and gpulayer_n to their number.
gpulayer_alive() {
	gpulayer_left=
	gpulayer_n=0
	for gpulayer_p in "$@"; do
		IFS= read -r gpulayer_stat </proc/$gpulayer_p/stat 2>/dev/null || continue
		gpulayer_stat=${gpulayer_stat##*\) }
		case $gpulayer_stat in
		Z* | X*) continue ;;
		esac
		case " $gpulayer_left " in
		*" $gpulayer_p "*) ;;
		*)
			gpulayer_left="$gpulayer_left $gpulayer_p"
			gpulayer_n=$((gpulayer_n + 1))
			;;
		esac
	done
}
# gpulayer_tree adds to gpulayer_found the leader's descendants, level by
# level (bounded: a tree deeper than 64 levels is left to the sweep): from
# each process's /proc/PID/task/TID/children, read with builtins (no fork:
# on a machine stopping many nodes at once, a pgrep per level, each
# reading every process's stat, is most of a stop's cost); where the
# kernel has no children files, one pgrep -P per level. Whether it has
# them is asked of this shell's own file, not the leader's: a leader that
# has ended has none either, and no descendants to find (its orphans went
# to the subreaper above it), so a pgrep then would find nothing at the
# cost of a fork and a read of every process.
gpulayer_tree() {
	[ -n "$gpulayer_leader" ] || return 0
	gpulayer_parents=$gpulayer_leader
	gpulayer_depth=0
	if [ -z "$gpulayer_children_files" ]; then
		gpulayer_ptree
		return
	fi
	while [ -n "$gpulayer_parents" ] && [ "$gpulayer_depth" -lt 64 ]; do
		gpulayer_level=
		for gpulayer_p in $gpulayer_parents; do
			for gpulayer_c in /proc/"$gpulayer_p"/task/*/children; do
				gpulayer_kids=
				IFS= read -r gpulayer_kids <"$gpulayer_c" 2>/dev/null || :
				[ -z "$gpulayer_kids" ] || gpulayer_level="$gpulayer_level $gpulayer_kids"
			done
		done
		gpulayer_found="$gpulayer_found$gpulayer_level"
		gpulayer_parents=$gpulayer_level
		gpulayer_depth=$((gpulayer_depth + 1))
	done
}
# gpulayer_ptree is gpulayer_tree by pgrep -P, one per level.
gpulayer_ptree() {
	while [ -n "$gpulayer_parents" ] && [ "$gpulayer_depth" -lt 64 ]; do
		gpulayer_level=$(pgrep -P "$gpulayer_parents" 2>/dev/null)
		# shellcheck disable=SC2086
		set -- $gpulayer_level
		[ $# -gt 0 ] || break
		gpulayer_found="$gpulayer_found $*"
		gpulayer_ifs=$IFS
		IFS=,
		gpulayer_parents="$*"
		IFS=$gpulayer_ifs
		gpulayer_depth=$((gpulayer_depth + 1))
	done
}
# gpulayer_scan is gpulayer_tree and pgrep -g without pgrep: passes over
# /proc adding the group's members and the children of those found,
# until a pass adds none (at most 64).
gpulayer_scan() {
	gpulayer_tree_pids=" $gpulayer_leader "
	gpulayer_pass=0
	gpulayer_more=1
	while [ -n "$gpulayer_more" ] && [ "$gpulayer_pass" -lt 64 ]; do
		gpulayer_more=
		for gpulayer_p in /proc/[0-9]*; do
			gpulayer_p=${gpulayer_p#/proc/}
			case $gpulayer_tree_pids in
			*" $gpulayer_p "*) continue ;;
			esac
			IFS= read -r gpulayer_stat </proc/$gpulayer_p/stat 2>/dev/null || continue
			gpulayer_stat=${gpulayer_stat##*\) }
			set -- $gpulayer_stat
			if { [ -n "$gpulayer_group" ] && [ "$3" = "$gpulayer_group" ]; } ||
				{ [ -n "$gpulayer_leader" ] && case $gpulayer_tree_pids in *" $2 "*) true ;; *) false ;; esac; }; then
				gpulayer_tree_pids="$gpulayer_tree_pids$gpulayer_p "
				gpulayer_found="$gpulayer_found $gpulayer_p"
				gpulayer_more=1
			fi
		done
		gpulayer_pass=$((gpulayer_pass + 1))
	done
}
# gpulayer_group_members PGID... adds to gpulayer_found the members of
# those process groups: the processes whose stat names one in its fifth
# field (the ")" matched is the line's last: the fields after the name
# are numbers, so a name cannot pass for them). grep reads each stat file
# once; pgrep -g, the fallback, opens half a dozen files of every process
# of the machine, which on a machine of hundreds of processes stopping
# dozens of nodes at once was most of a stop's cost.
gpulayer_group_members() {
	gpulayer_re=
	gpulayer_csv=
	for gpulayer_g in "$@"; do
		gpulayer_re="$gpulayer_re${gpulayer_re:+|}$gpulayer_g"
		gpulayer_csv="$gpulayer_csv${gpulayer_csv:+,}$gpulayer_g"
	done
	if [ -z "$gpulayer_grep" ]; then
		gpulayer_found="$gpulayer_found $(pgrep -g "$gpulayer_csv" 2>/dev/null)"
		return
	fi
	for gpulayer_f in $(grep -lE '^[0-9]+ \(.*\) [A-Za-z] [0-9]+ ('"$gpulayer_re"') [^)]*$' /proc/[0-9]*/stat 2>/dev/null); do
		gpulayer_f=${gpulayer_f#/proc/}
		gpulayer_found="$gpulayer_found ${gpulayer_f%/stat}"
	done
}
# gpulayer_members sets gpulayer_left to the live pids of the node: its
# leader's process group and tree, and the processes whose environment
# carries the node's marker (only the user's own are readable).
gpulayer_members() {
	gpulayer_found=
	if [ -n "$gpulayer_group" ] && ! gpulayer_killpg 0 "$gpulayer_group"; then
		gpulayer_group= # the group is gone; nothing can join it again
	fi
	# The groups whose members are listed: the node's own where this stop
	# sweeps (else the sweeping stop lists it), and those it sweeps for.
	gpulayer_listed=
	[ -z "$gpulayer_sweeps" ] || gpulayer_listed=$gpulayer_group
	gpulayer_others=
	for gpulayer_g in $gpulayer_other_groups; do
		gpulayer_killpg 0 "$gpulayer_g" || continue
		gpulayer_others="$gpulayer_others $gpulayer_g"
		gpulayer_listed="$gpulayer_listed $gpulayer_g"
	done
	gpulayer_other_groups=$gpulayer_others
	if [ -n "$gpulayer_listed" ] && { [ -n "$gpulayer_grep" ] || [ -n "$gpulayer_pgrep" ]; }; then
		# shellcheck disable=SC2086
		gpulayer_group_members $gpulayer_listed
	fi
	if [ -n "$gpulayer_children_files" ] || [ -n "$gpulayer_pgrep" ]; then
		gpulayer_tree
	elif [ -n "$gpulayer_group" ] || [ -n "$gpulayer_leader" ]; then
		gpulayer_scan
	fi
	if [ -n "$gpulayer_sweeps" ]; then
		for gpulayer_f in $(gpulayer_sweep); do
			gpulayer_f=${gpulayer_f#/proc/}
			gpulayer_found="$gpulayer_found ${gpulayer_f%/environ}"
		done
	fi
	gpulayer_alive $gpulayer_found
	# A full look that found nothing: the node is gone, and nothing is
	# left to signal until a later look finds more.
	gpulayer_swept=
	[ "$gpulayer_n" -ne 0 ] || gpulayer_swept=1
}
# gpulayer_first sets gpulayer_left to the leader and its tree alone: a
# cheap first pass that forks nothing where the kernel has children files
# and reads no process's environment (the group is signalled as a whole
# below, and its members outside the tree found by the full look once
# the tree is gone). Without the leader, or when it found none, it is
# gpulayer_members.
gpulayer_first() {
	if [ -n "$gpulayer_leader" ]; then
		gpulayer_found=$gpulayer_leader
		gpulayer_tree
		gpulayer_alive $gpulayer_found
		[ "$gpulayer_n" -gt 0 ] && return
	fi
	gpulayer_members
}
# First the leader's group and tree; once they are gone, the full sweep
# below (the loop's) finds any process of the node that left them, by its
# environment.
gpulayer_swept=
gpulayer_first
gpulayer_signalled=$gpulayer_n
[ "$gpulayer_n" -eq 0 ] || kill -s TERM $gpulayer_left 2>/dev/null
[ -z "$gpulayer_group" ] || gpulayer_killpg TERM "$gpulayer_group"
# Between full looks (when the processes known are gone, to find any the
# node started since, a worker restarting), only the known ones are
# checked: first 10 ms after the signal (most processes end within
# milliseconds of SIGTERM), then at intervals doubling up to half a
# second. A full look that finds nothing ends the stop: it is never
# repeated.
gpulayer_waited=0
gpulayer_step=10
while [ -z "$gpulayer_swept" ] && [ "$gpulayer_waited" -lt "$gpulayer_grace_ms" ]; do
	if [ "$gpulayer_n" -eq 0 ]; then
		gpulayer_members
		[ "$gpulayer_n" -eq 0 ] && break
		gpulayer_signalled=$((gpulayer_signalled + gpulayer_n))
		kill -s TERM $gpulayer_left 2>/dev/null
	fi
	gpulayer_sleep_ms "$gpulayer_step"
	gpulayer_waited=$((gpulayer_waited + gpulayer_step))
	gpulayer_step=$((gpulayer_step * 2))
	[ "$gpulayer_step" -le 500 ] || gpulayer_step=500
	gpulayer_alive $gpulayer_left
done
[ "$gpulayer_n" -eq 0 ] && [ -z "$gpulayer_swept" ] && gpulayer_members
gpulayer_killed=$gpulayer_n
[ "$gpulayer_n" -eq 0 ] || kill -s KILL $gpulayer_left 2>/dev/null
# A process killed can leave children it had just started (an orphaned
# sleep of a stuck loop): look again a few times, 10 ms and doubling, and
# kill those too.
gpulayer_remaining=0
gpulayer_round=0
gpulayer_step=10
while [ "$gpulayer_killed" -gt 0 ] && [ "$gpulayer_round" -lt 5 ]; do
	gpulayer_sleep_ms "$gpulayer_step"
	gpulayer_step=$((gpulayer_step * 2))
	gpulayer_members
	gpulayer_remaining=$gpulayer_n
	[ "$gpulayer_n" -eq 0 ] && break
	kill -s KILL $gpulayer_left 2>/dev/null
	gpulayer_round=$((gpulayer_round + 1))
done
printf 'gpulayer-stop:ok %s %s %s\n' "$gpulayer_signalled" "$gpulayer_killed" "$gpulayer_remaining"
`

// Stopped is what a stop reported.
type Stopped struct {
	Signalled, Killed, Left int
}

// ParseStopped reads the stop script's output.
func ParseStopped(out []byte) (Stopped, error) {
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(l, "gpulayer-stop:ok ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 3 {
			break
		}
		var n [3]int
		for i := range f {
			v, err := strconv.Atoi(f[i])
			if err != nil {
				return Stopped{}, fmt.Errorf("the stop script printed %q", l)
			}
			n[i] = v
		}
		return Stopped{Signalled: n[0], Killed: n[1], Left: n[2]}, nil
	}
	return Stopped{}, fmt.Errorf("the stop script printed no result (%q)", clip(string(out)))
}

// StopTimeout bounds a stop script on its machine: the grace period, the
// SIGKILL and the checks around them.
func StopTimeout(grace time.Duration) time.Duration { return grace + 20*time.Second }
