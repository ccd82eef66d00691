package facts

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gpulayer/gpulayer/topology"
)

// Limits on what a machine may make gpulayer keep. A real probe prints
// about 10 KB (a DGX with 8 GPUs and 8 NICs), and the largest machine
// gpulayer supports (64 GPUs, each with a few processes, and NICs in its
// topo -m) well under 200 KB; the limits leave that much headroom again,
// so that only a broken or hostile machine reaches them. docs/facts.md
// lists them.
const (
	// MaxOutputBytes bounds what a probe may write to stdout, and to
	// stderr. A host whose output reaches it is failed (reconcile/probe);
	// Parse reads no more than this.
	MaxOutputBytes = 1 << 20
	// MaxFieldBytes bounds each text field a machine reports (hostname,
	// kernel, product name, torch and driver versions, boot id, a GPU's
	// UUID, name and bus id, the GCE zone). A longer value is cut, ends in
	// "…", and a warning says so.
	MaxFieldBytes = 256
	// MaxGPUs is the most `nvidia-smi --query-gpu` rows read: the most
	// GPUs a machine can have in gpulayer (topology.MaxGPUs).
	MaxGPUs = topology.MaxGPUs
	// MaxProcesses is the most `--query-compute-apps` rows read (64 per
	// GPU of the largest machine).
	MaxProcesses = 64 * topology.MaxGPUs
	// MaxPIDRows is the most rows of the pids section read.
	MaxPIDRows = 4096
	// MaxWarnings is the most warnings one host keeps; the last says that
	// more were dropped.
	MaxWarnings = 100
	// LogTailLines and MaxLogLineBytes bound the end of a gone process's
	// log kept in its PID: the last lines of at most 16 KiB the script
	// reads, each cut to this many bytes.
	LogTailLines    = 20
	MaxLogLineBytes = 512
)

// LogTail is the last LogTailLines lines of a log's end, each cut to
// MaxLogLineBytes; nil for an empty log.
func LogTail(log string) []string {
	log = strings.TrimRight(log, "\n")
	if log == "" {
		return nil
	}
	lines := strings.Split(log, "\n")
	if len(lines) > LogTailLines {
		lines = lines[len(lines)-LogTailLines:]
	}
	for i, l := range lines {
		lines[i] = truncate(strings.TrimSuffix(l, "\r"), MaxLogLineBytes)
	}
	return lines
}

// warningsDropped ends a host's warnings when it has more than MaxWarnings.
var warningsDropped = fmt.Sprintf("more than %d warnings; the rest are dropped", MaxWarnings)

// field returns v, a text field named what that the machine reported, cut
// to MaxFieldBytes with a warning when it is longer.
func (h *Host) field(what, v string) string {
	if len(v) <= MaxFieldBytes {
		return v
	}
	h.warn("%s is %d bytes long: cut to %d", what, len(v), MaxFieldBytes)
	return truncate(v, MaxFieldBytes)
}

// truncate cuts s to at most max bytes, ending in "…", without splitting a
// UTF-8 sequence.
func truncate(s string, max int) string {
	const mark = "…"
	if len(s) <= max {
		return s
	}
	n := max - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}

// rows returns at most max of the non-blank lines of text, with a warning
// naming what when there were more.
func (h *Host) rows(text, what string, max int) []string {
	all := lines(text)
	if len(all) > max {
		h.warn("%s: %d rows, more than the %d gpulayer reads; the rest are ignored", what, len(all), max)
		all = all[:max]
	}
	return all
}
