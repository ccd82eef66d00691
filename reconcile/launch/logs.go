package launch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/ssh"
)

// MaxLogChunk bounds what one logs call brings back from one node.
const MaxLogChunk = 256 << 10

// LogsScript is the sh script that prints part of a node's log after a
// header line "gpulayer-logs SIZE", SIZE being the log's length now: with
// lines > 0, its last lines; otherwise what follows byte offset from (to
// follow a log, each call asks from the SIZE the last one said). At most
// MaxLogChunk bytes come back per call. A missing log prints "gpulayer-logs
// -".
func LogsScript(job, runID string, rank int, lines int, from int64) string {
	var part string
	if lines > 0 {
		part = fmt.Sprintf("tail -n %d \"$gpulayer_log\" | tail -c %d", lines, MaxLogChunk)
	} else {
		part = fmt.Sprintf("tail -c +%d \"$gpulayer_log\" | head -c %d", from+1, MaxLogChunk)
	}
	return fmt.Sprintf(`gpulayer_log="$HOME"/%s
if [ ! -r "$gpulayer_log" ]; then
	echo 'gpulayer-logs -'
	exit 0
fi
gpulayer_size=$(wc -c <"$gpulayer_log")
echo "gpulayer-logs $gpulayer_size"
%s
`, ssh.Quote(LogPath(job, runID, rank)), part)
}

// LogChunk is what a logs call brought back.
type LogChunk struct {
	// Size is the log's length when it was read; -1 when there is no log.
	Size int64
	Text string
}

// ParseLogs reads a logs script's output.
func ParseLogs(out []byte) (LogChunk, error) {
	head, rest, _ := strings.Cut(string(out), "\n")
	size, ok := strings.CutPrefix(strings.TrimSpace(head), "gpulayer-logs ")
	if !ok {
		return LogChunk{}, fmt.Errorf("the logs script printed %q", clip(string(out)))
	}
	if size == "-" {
		return LogChunk{Size: -1}, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(size), 10, 64)
	if err != nil || n < 0 {
		return LogChunk{}, fmt.Errorf("the logs script printed size %q", clip(size))
	}
	return LogChunk{Size: n, Text: rest}, nil
}
