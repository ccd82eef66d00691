package launch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/ssh"
)

// MaxLogChunk bounds what one logs call brings back from one node.
const MaxLogChunk = 256 << 10

// LogsRequest says which part of a node's log a LogsScript prints.
type LogsRequest struct {
	Job   string
	RunID string
	Rank  int
	// Lines > 0 asks for the log's last lines; otherwise what follows byte
	// offset From (to follow a log, each call asks from where the last
	// one's text ended).
	Lines int
	From  int64
	// Leader, when set, is the node's recorded process: the script then
	// also says whether it still runs and, when it does not, how it ended.
	Leader *state.Process
}

// LogsScript is the sh script that prints part of a node's log after a
// header line
//
//	gpulayer-logs SIZE [running | ended STATUS]
//
// SIZE being the log's length now, - when there is no log, or ! when it
// is not a regular file (a FIFO, a device or a link to one: never read,
// for it could block or never end). At most MaxLogChunk bytes come back
// per call. With a Leader the header says whether it runs, or how it
// ended (STATUS as CheckScript's); the leader is looked at before the
// log, so once it has ended the log's SIZE is all there will be.
func LogsScript(r LogsRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpulayer_log=\"$HOME\"/%s\n", ssh.Quote(LogPath(r.Job, r.RunID, r.Rank)))
	b.WriteString(boundedFunc)
	b.WriteString("gpulayer_end=\n")
	if p := r.Leader; p != nil {
		fmt.Fprintf(&b, "gpulayer_exit=\"$HOME\"/%s\n", ssh.Quote(ExitPath(r.Job, r.RunID, r.Rank)))
		b.WriteString(aliveScript(p.PID, p.StartTime, p.BootID))
		fmt.Fprintf(&b, `if [ -n "$gpulayer_alive" ]; then
	gpulayer_end=' running'
else
%s	gpulayer_end=" ended $gpulayer_status"
fi
`, indent(exitStatusScript))
	}
	// wc and tail open the log themselves, under timeout: a redirection
	// would open it in this shell, unbounded.
	b.WriteString(`if [ -f "$gpulayer_log" ] && [ -r "$gpulayer_log" ]; then
	{ gpulayer_size=$(gpulayer_bounded 5 wc -c "$gpulayer_log" 2>/dev/null); } 2>/dev/null
	# shellcheck disable=SC2086 # wc prints "SIZE PATH": SIZE is the first field
	set -- $gpulayer_size
	gpulayer_size=${1:-!}
	case $gpulayer_size in
	*[!0-9]*) gpulayer_size=! ;;
	esac
elif [ -e "$gpulayer_log" ] && [ ! -f "$gpulayer_log" ]; then
	gpulayer_size=!
else
	gpulayer_size=-
fi
echo "gpulayer-logs $gpulayer_size$gpulayer_end"
case $gpulayer_size in
[0-9]*) ;;
*) exit 0 ;;
esac
`)
	if r.Lines > 0 {
		fmt.Fprintf(&b, "gpulayer_bounded 5 tail -n %d \"$gpulayer_log\" 2>/dev/null | tail -c %d\n", r.Lines, MaxLogChunk)
	} else {
		fmt.Fprintf(&b, "gpulayer_bounded 5 tail -c +%d \"$gpulayer_log\" 2>/dev/null | head -c %d\n", max(r.From, 0)+1, MaxLogChunk)
	}
	return b.String()
}

// indent puts a tab before each line of a script fragment.
func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n\t") + "\n"
}

// LogChunk is what a logs call brought back.
type LogChunk struct {
	// Size is the log's length when it was read; -1 when there is no log
	// or it is not a regular file.
	Size int64
	// NotRegular says the log is there but is not a regular file, so it
	// was not read.
	NotRegular bool
	Text       string
	// Known says the call asked about the node's leader (LogsRequest's
	// Leader); Ended then says it has gone, and Exit how.
	Known bool
	Ended bool
	Exit  Exit
}

// ParseLogs reads a logs script's output.
func ParseLogs(out []byte) (LogChunk, error) {
	head, rest, _ := strings.Cut(string(out), "\n")
	words, ok := strings.CutPrefix(strings.TrimSpace(head), "gpulayer-logs ")
	f := strings.Fields(words)
	if !ok || len(f) == 0 {
		return LogChunk{}, fmt.Errorf("the logs script printed %q", clip(string(out)))
	}
	var c LogChunk
	switch {
	case len(f) == 1:
	case len(f) == 2 && f[1] == "running":
		c.Known = true
	case len(f) == 3 && f[1] == "ended":
		c.Known, c.Ended, c.Exit = true, true, parseExit(f[2])
	default:
		return LogChunk{}, fmt.Errorf("the logs script printed %q", clip(head))
	}
	switch f[0] {
	case "-":
		c.Size = -1
		return c, nil
	case "!":
		c.Size, c.NotRegular = -1, true
		return c, nil
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return LogChunk{}, fmt.Errorf("the logs script printed size %q", clip(f[0]))
	}
	c.Size, c.Text = n, rest
	return c, nil
}
