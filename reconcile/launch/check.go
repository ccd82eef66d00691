package launch

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gpulayer/gpulayer/ssh"
)

// LogTailLines is how many of a node's last log lines a check brings
// back, and MaxLogLine how many bytes of each.
const (
	LogTailLines = 20
	MaxLogLine   = 512
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
//	...the log's last LogTailLines lines...
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
[ -r "$gpulayer_log" ] && tail -n %d "$gpulayer_log" 2>/dev/null
exit 0
`, pid, startTime, ssh.Quote(ExitPath(job, runID, rank)), ssh.Quote(LogPath(job, runID, rank)), LogTailLines)
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
			c.LogTail = TailLines(log)
		}
		return c, nil
	}
	return Checked{}, fmt.Errorf("the check script printed %q", clip(text))
}

// TailLines splits a log's tail into at most LogTailLines lines of at
// most MaxLogLine bytes each (valid UTF-8 kept whole).
func TailLines(log string) []string {
	log = strings.TrimRight(log, "\n")
	if log == "" {
		return nil
	}
	lines := strings.Split(log, "\n")
	if len(lines) > LogTailLines {
		lines = lines[len(lines)-LogTailLines:]
	}
	for i, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if len(l) > MaxLogLine {
			cut := MaxLogLine
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			l = l[:cut] + "…"
		}
		lines[i] = l
	}
	return lines
}
