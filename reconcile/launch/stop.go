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

// StopScript is the sh script that stops a node: SIGTERM to the leader's
// process group, and to every process of the user whose environment holds
// GPULAYER_RUN_ID=RunID (torchrun starts its workers in new sessions, so
// the group alone would leave them holding GPUs); then up to Grace for
// them to end, checked every tenth of a second; then SIGKILL for what is
// left. The group is signalled only when its leader is still the recorded
// process (same start time) or is gone: a pid is not reused while its
// process group has members, so a group whose leader exited holds only
// the job's processes.
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
# gpulayer_members prints the pids of the run: its group's and those whose
# environment carries the marker (only the user's own are readable).
gpulayer_members() {
	gpulayer_out=
	if [ -n "$gpulayer_group" ]; then
		for gpulayer_p in /proc/[0-9]*; do
			gpulayer_p=${gpulayer_p#/proc/}
			IFS= read -r gpulayer_stat </proc/$gpulayer_p/stat 2>/dev/null || continue
			gpulayer_stat=${gpulayer_stat##*\) }
			set -- $gpulayer_stat
			[ "$1" = Z ] && continue
			[ "$3" = "$gpulayer_group" ] && gpulayer_out="$gpulayer_out $gpulayer_p"
		done
	fi
	for gpulayer_f in $(grep -lzxF -e "$gpulayer_marker" /proc/[0-9]*/environ 2>/dev/null); do
		gpulayer_p=${gpulayer_f#/proc/}
		gpulayer_p=${gpulayer_p%/environ}
		[ "$gpulayer_p" = "$$" ] && continue
		IFS= read -r gpulayer_stat </proc/$gpulayer_p/stat 2>/dev/null || continue
		gpulayer_stat=${gpulayer_stat##*\) }
		set -- $gpulayer_stat
		[ "$1" = Z ] && continue
		case " $gpulayer_out " in
		*" $gpulayer_p "*) ;;
		*) gpulayer_out="$gpulayer_out $gpulayer_p" ;;
		esac
	done
	printf '%s\n' "$gpulayer_out"
}
gpulayer_any() {
	case $gpulayer_left in
	*[0-9]*) return 0 ;;
	esac
	return 1
}
gpulayer_left=$(gpulayer_members)
gpulayer_signalled=0
for gpulayer_p in $gpulayer_left; do
	kill -TERM "$gpulayer_p" 2>/dev/null && gpulayer_signalled=$((gpulayer_signalled + 1))
done
gpulayer_tick=0
while gpulayer_any && [ "$gpulayer_tick" -lt "$gpulayer_ticks" ]; do
	sleep 0.1 2>/dev/null || sleep 1
	gpulayer_tick=$((gpulayer_tick + 1))
	gpulayer_left=$(gpulayer_members)
	# Processes the run started since (a worker restarting) get SIGTERM too.
	for gpulayer_p in $gpulayer_left; do kill -TERM "$gpulayer_p" 2>/dev/null; done
done
gpulayer_killed=0
for gpulayer_p in $gpulayer_left; do
	kill -KILL "$gpulayer_p" 2>/dev/null && gpulayer_killed=$((gpulayer_killed + 1))
done
gpulayer_remaining=0
if [ "$gpulayer_killed" -gt 0 ]; then
	sleep 0.2 2>/dev/null || sleep 1
	for gpulayer_p in $(gpulayer_members); do gpulayer_remaining=$((gpulayer_remaining + 1)); done
fi
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
