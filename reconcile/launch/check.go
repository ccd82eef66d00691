package launch

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/ssh"
)

// CheckScript is the sh script that says whether a node's process still
// runs (same pid, same start time) and, when it does not, its exit
// status and the last lines of its log. It watches the process for up to
// wait, first 300 ms after the script starts and then every half a
// second (the last look cut to what is left of wait), and answers as soon as the
// process has ended, or once wait has passed with it running (at once
// for a wait of 0). It prints
//
//	gpulayer-check:alive
//
// or
//
//	gpulayer-check:exited STATUS   (STATUS is - when the node wrote none,
//	                                ! when its exit file is not a regular file)
//	gpulayer-check:log             (gpulayer-check:log-not-regular when the
//	                                log is not a regular file)
//	...the log's end (at most 16 KiB)...
//
// A launch script ends with the same watch and report (Started.Check).
func CheckScript(job, runID string, rank, pid int, startTime uint64, wait time.Duration) string {
	return fmt.Sprintf(`gpulayer_exit="$HOME"/%s
gpulayer_log="$HOME"/%s
gpulayer_pid=%d
gpulayer_start=%d
`, ssh.Quote(ExitPath(job, runID, rank)), ssh.Quote(LogPath(job, runID, rank)), pid, startTime) + startCheckScript(wait, false)
}

// reportScript prints a check's report from $gpulayer_alive, the node's
// exit file ($gpulayer_exit) and log ($gpulayer_log).
const reportScript = `if [ -n "$gpulayer_alive" ]; then
	echo gpulayer-check:alive
	exit 0
fi
` + exitStatusScript + `echo "gpulayer-check:exited $gpulayer_status"
if [ -f "$gpulayer_log" ]; then
	echo gpulayer-check:log
	[ ! -r "$gpulayer_log" ] || gpulayer_bounded 5 tail -c 16384 "$gpulayer_log" 2>/dev/null
elif [ -e "$gpulayer_log" ]; then
	echo gpulayer-check:log-not-regular
else
	echo gpulayer-check:log
fi
exit 0
`

// sleepMsFunc defines gpulayer_sleep_ms MS (under 1000), a sleep of MS
// milliseconds written as sleep(1) takes fractions (GNU, busybox), or of
// a second where it takes none; the number is spelled without a fork.
const sleepMsFunc = `gpulayer_sleep_ms() {
	case $1 in
	[0-9]) gpulayer_s=0.00$1 ;;
	[0-9][0-9]) gpulayer_s=0.0$1 ;;
	[0-9][0-9][0-9]) gpulayer_s=0.$1 ;;
	*) gpulayer_s=1 ;;
	esac
	sleep "$gpulayer_s" 2>/dev/null || sleep 1
}
`

// boundedFunc defines gpulayer_bounded SECONDS COMMAND [ARG...], which runs
// COMMAND under timeout(1) where the machine has it, as the probe does: a
// run file replaced by a FIFO between its test and its open must not hang
// the script, and closing the SSH session would not stop it.
const boundedFunc = `gpulayer_bounded() {
	if command -v timeout >/dev/null 2>&1; then
		timeout "$@"
	else
		shift
		"$@"
	fi
}
`

// aliveScript sets gpulayer_alive to 1 when process pid runs with start
// time start (not a zombie) and, when bootID is set, the machine has not
// rebooted since; to "" otherwise. /proc files are read with builtins: no
// fork while a node runs.
func aliveScript(pid int, start uint64, bootID string) string {
	s := fmt.Sprintf("gpulayer_pid=%d\ngpulayer_start=%d\n", pid, start) + aliveVarsScript
	if bootID != "" {
		s += fmt.Sprintf(`if [ -n "$gpulayer_alive" ]; then
	gpulayer_boot=
	IFS= read -r gpulayer_boot 2>/dev/null </proc/sys/kernel/random/boot_id || :
	[ -z "$gpulayer_boot" ] || [ "$gpulayer_boot" = %s ] || gpulayer_alive=
fi
`, ssh.Quote(bootID))
	}
	return s
}

// aliveVarsScript is aliveScript of $gpulayer_pid and $gpulayer_start,
// without the boot id.
const aliveVarsScript = `gpulayer_alive=
if IFS= read -r gpulayer_stat 2>/dev/null </proc/$gpulayer_pid/stat; then
	gpulayer_stat=${gpulayer_stat##*\) }
	# shellcheck disable=SC2086 # split into the stat line's fields
	set -- $gpulayer_stat
	gpulayer_state=$1
	shift 19
	case $gpulayer_state in
	Z* | X*) ;;
	*) [ "$1" != "$gpulayer_start" ] || gpulayer_alive=1 ;;
	esac
fi
`

// exitStatusScript sets gpulayer_status to the status the node's exit file
// ($gpulayer_exit) records, - when it records none, or ! when it is there
// but is not a regular file. Only a regular file is read, at most 32
// bytes of it (a status and a newline), under timeout: a FIFO would block
// the read, and a device or a runaway file would never end it. The braces
// keep bash's warning about a NUL byte off stderr.
const exitStatusScript = `gpulayer_status=-
if [ -f "$gpulayer_exit" ]; then
	{ gpulayer_status=$(gpulayer_bounded 2 head -c 32 "$gpulayer_exit" 2>/dev/null); } 2>/dev/null
	case $gpulayer_status in
	[0-9] | [0-9][0-9] | [0-9][0-9][0-9]) ;;
	*) gpulayer_status=- ;;
	esac
elif [ -e "$gpulayer_exit" ]; then
	gpulayer_status=!
fi
`

// Checked is what a check found.
type Checked struct {
	Alive bool
	// Exit is how the node ended, when it is not alive.
	Exit    Exit
	LogTail []string
	// LogNotRegular says the node's log is not a regular file (a FIFO, a
	// device, or a link to one), so it was not read.
	LogNotRegular bool
}

// Exit is what a node's exit file says once its leader has gone.
type Exit struct {
	// Status is the status the node recorded; nil when it recorded none
	// (killed by SIGKILL, or the machine rebooted).
	Status *int
	// NotRegular says the exit file is there but is not a regular file (a
	// FIFO, a device, or a link to one), so it was not read.
	NotRegular bool
}

// String says how the node ended, for a person: "exited with status 3",
// "killed by signal 9 (status 137)", "ended without an exit status". A
// status above 128 is how sh reports a command a signal ended; the leader
// records what sh reported.
func (e Exit) String() string {
	switch {
	case e.Status != nil && *e.Status > 128 && *e.Status <= 128+64:
		return fmt.Sprintf("killed by signal %d (status %d)", *e.Status-128, *e.Status)
	case e.Status != nil:
		return fmt.Sprintf("exited with status %d", *e.Status)
	case e.NotRegular:
		return "ended; its exit file is not a regular file (not read)"
	}
	return "ended without an exit status"
}

// parseExit reads the STATUS word of a check or logs script.
func parseExit(word string) Exit {
	if word == "!" {
		return Exit{NotRegular: true}
	}
	if v, err := strconv.Atoi(word); err == nil && v >= 0 {
		return Exit{Status: &v}
	}
	return Exit{}
}

// ParseChecked reads a check script's output.
func ParseChecked(out []byte) (Checked, error) {
	text := string(out)
	first, rest, _ := strings.Cut(text, "\n")
	first = strings.TrimSpace(first)
	switch {
	case first == "gpulayer-check:alive":
		return Checked{Alive: true}, nil
	case strings.HasPrefix(first, "gpulayer-check:exited "):
		c := Checked{Exit: parseExit(strings.TrimPrefix(first, "gpulayer-check:exited "))}
		if log, ok := strings.CutPrefix(rest, "gpulayer-check:log\n"); ok {
			c.LogTail = facts.LogTail(log)
		} else if strings.HasPrefix(rest, "gpulayer-check:log-not-regular\n") {
			c.LogNotRegular = true
		}
		return c, nil
	}
	return Checked{}, fmt.Errorf("the check script printed %q", clip(text))
}
