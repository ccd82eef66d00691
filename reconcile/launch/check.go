package launch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/reconcile/facts"
	"github.com/gpulayer/gpulayer/ssh"
)

// CheckScript is the sh script that says whether a node's process still
// runs (same pid, same start time) and, when it does not, its exit
// status and the last lines of its log. It prints
//
//	gpulayer-check:alive
//
// or
//
//	gpulayer-check:exited STATUS   (STATUS is - when the node wrote none)
//	gpulayer-check:log
//	...the log's end (at most 16 KiB)...
func CheckScript(job, runID string, rank, pid int, startTime uint64) string {
	return fmt.Sprintf(`gpulayer_pid=%d
gpulayer_start=%d
gpulayer_exit="$HOME"/%s
gpulayer_log="$HOME"/%s
if IFS= read -r gpulayer_stat </proc/$gpulayer_pid/stat 2>/dev/null; then
	gpulayer_stat=${gpulayer_stat##*\) }
	set -- $gpulayer_stat
	gpulayer_state=$1
	shift 19
	if [ "$1" = "$gpulayer_start" ] && [ "$gpulayer_state" != Z ]; then
		echo gpulayer-check:alive
		exit 0
	fi
fi
gpulayer_status=-
[ -r "$gpulayer_exit" ] && IFS= read -r gpulayer_status <"$gpulayer_exit"
echo "gpulayer-check:exited ${gpulayer_status:--}"
echo gpulayer-check:log
[ -r "$gpulayer_log" ] && tail -c 16384 "$gpulayer_log" 2>/dev/null
exit 0
`, pid, startTime, ssh.Quote(ExitPath(job, runID, rank)), ssh.Quote(LogPath(job, runID, rank)))
}

// Checked is what a check found.
type Checked struct {
	Alive bool
	// ExitStatus is the status the node recorded; nil when it wrote none
	// (killed by SIGKILL, or the machine rebooted).
	ExitStatus *int
	LogTail    []string
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
		c := Checked{}
		if v, err := strconv.Atoi(strings.TrimPrefix(first, "gpulayer-check:exited ")); err == nil {
			c.ExitStatus = &v
		}
		if log, ok := strings.CutPrefix(rest, "gpulayer-check:log\n"); ok {
			c.LogTail = facts.LogTail(log)
		}
		return c, nil
	}
	return Checked{}, fmt.Errorf("the check script printed %q", clip(text))
}
