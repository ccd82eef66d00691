package launch

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/ssh"
)

// Stop is what stopping one node needs.
type Stop struct {
	// PID and StartTime identify the node's leader process (0 when none
	// was recorded: only the sweep runs).
	PID       int
	StartTime uint64
	// RunID is the job's launch: every process carrying it in its
	// environment is stopped, wherever its session or group.
	RunID string
	// Grace is how long processes get between SIGTERM and SIGKILL.
	Grace time.Duration
}

// StopScript is the sh script that stops a node. It sends SIGTERM to the
// leader's process group (found with pgrep),
// waits up to Grace for them to end, checked at intervals growing from a
// tenth to half a second, then sweeps for every process of the user whose
// environment holds GPULAYER_RUN_ID=RunID (a worker that left the group,
// one started since) and sends those SIGTERM too; what is left at the end
// of Grace gets SIGKILL. The environment sweep runs once the group is gone:
// reading the environment of processes that are exiting is what makes a
// stop slow on a busy machine. The group is signalled only when its leader
// is still the recorded process (same start time) or is gone: a pid is not
// reused while its process group has members, so a group whose leader
// exited holds only the job's processes.
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
	w("gpulayer_marker=%s\n", ssh.Quote("GPULAYER_RUN_ID="+s.RunID))
	w("gpulayer_ticks=%d\n", max(0, int(s.Grace/(100*time.Millisecond))))
	b.WriteString(stopBody)
	return b.String()
}

// stopBody is the part of every stop script after its values.
const stopBody = `gpulayer_group=
if [ "$gpulayer_pid" -gt 0 ]; then
	if IFS= read -r gpulayer_stat </proc/$gpulayer_pid/stat 2>/dev/null; then
		gpulayer_stat=${gpulayer_stat##*\) }
		set -- $gpulayer_stat
		shift 19
		[ "$1" = "$gpulayer_start" ] && gpulayer_group=$gpulayer_pid
	elif kill -0 -- "-$gpulayer_pid" 2>/dev/null; then
		gpulayer_group=$gpulayer_pid
	fi
fi
gpulayer_pgrep=
command -v pgrep >/dev/null 2>&1 && gpulayer_pgrep=1
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
# gpulayer_members sets gpulayer_left to the live pids of the run: its
# leader's process group (pgrep where there is one, else a scan of /proc)
# and the processes whose environment carries the marker (only the
# user's own are readable).
gpulayer_members() {
	gpulayer_found=
	if [ -n "$gpulayer_group" ] && ! kill -0 -- "-$gpulayer_group" 2>/dev/null; then
		gpulayer_group= # the group is gone; nothing can join it again
	fi
	if [ -n "$gpulayer_group" ] && [ -n "$gpulayer_pgrep" ]; then
		gpulayer_found=$(pgrep -g "$gpulayer_group" 2>/dev/null)
	elif [ -n "$gpulayer_group" ]; then
		for gpulayer_p in /proc/[0-9]*; do
			gpulayer_p=${gpulayer_p#/proc/}
			IFS= read -r gpulayer_stat </proc/$gpulayer_p/stat 2>/dev/null || continue
			gpulayer_stat=${gpulayer_stat##*\) }
			set -- $gpulayer_stat
			[ "$3" = "$gpulayer_group" ] && gpulayer_found="$gpulayer_found $gpulayer_p"
		done
	fi
	for gpulayer_f in $(grep -lzxF -e "$gpulayer_marker" /proc/[0-9]*/environ 2>/dev/null); do
		gpulayer_f=${gpulayer_f#/proc/}
		gpulayer_found="$gpulayer_found ${gpulayer_f%/environ}"
	done
	gpulayer_alive $gpulayer_found
}
# gpulayer_first sets gpulayer_left to the leader's process group alone,
# from pgrep: a cheap first pass that reads no process's environment.
# Without pgrep, without the group, or when the group is empty, it is
# gpulayer_members.
gpulayer_first() {
	if [ -n "$gpulayer_group" ] && [ -n "$gpulayer_pgrep" ]; then
		# shellcheck disable=SC2046
		gpulayer_alive $(pgrep -g "$gpulayer_group" 2>/dev/null)
		[ "$gpulayer_n" -gt 0 ] && return
	fi
	gpulayer_members
}
# First the leader's group; once it is gone, the full sweep below (the
# loop's) finds any process of the run that left it (torchrun's workers
# start sessions of their own), by its environment.
gpulayer_first
gpulayer_signalled=$gpulayer_n
[ "$gpulayer_n" -eq 0 ] || kill -TERM $gpulayer_left 2>/dev/null
# Between full scans (when the processes known are gone, to find any the
# run started since, a worker restarting), only the known ones are
# checked, at intervals growing from a tenth to half a second.
gpulayer_tick=0
gpulayer_wait=1
while [ "$gpulayer_tick" -lt "$gpulayer_ticks" ]; do
	if [ "$gpulayer_n" -eq 0 ]; then
		gpulayer_members
		[ "$gpulayer_n" -eq 0 ] && break
		gpulayer_signalled=$((gpulayer_signalled + gpulayer_n))
		kill -TERM $gpulayer_left 2>/dev/null
	fi
	sleep "0.$gpulayer_wait" 2>/dev/null || sleep 1
	gpulayer_tick=$((gpulayer_tick + gpulayer_wait))
	[ "$gpulayer_wait" -lt 5 ] && gpulayer_wait=$((gpulayer_wait + 1))
	gpulayer_alive $gpulayer_left
done
[ "$gpulayer_n" -eq 0 ] && gpulayer_members
gpulayer_killed=$gpulayer_n
[ "$gpulayer_n" -eq 0 ] || kill -KILL $gpulayer_left 2>/dev/null
# A process killed can leave children it had just started (an orphaned
# sleep of a stuck loop): look again a few times and kill those too.
gpulayer_remaining=0
gpulayer_round=0
while [ "$gpulayer_killed" -gt 0 ] && [ "$gpulayer_round" -lt 5 ]; do
	sleep 0.1 2>/dev/null || sleep 1
	gpulayer_members
	gpulayer_remaining=$gpulayer_n
	[ "$gpulayer_n" -eq 0 ] && break
	kill -KILL $gpulayer_left 2>/dev/null
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
