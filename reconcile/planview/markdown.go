package planview

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// MarkdownMarker is the hidden first line of every markdown plan, so that
// a bot updating a pull request finds its own comment and edits it rather
// than adding another.
const MarkdownMarker = "<!-- gpulayer-plan -->"

// Markdown writes a plan as a pull-request comment: the marker, a summary
// line, where the facts came from, a table of the changes, and a
// collapsible section per changed job with its reasons, what it stops, its
// placement and, for jobs that cannot be placed, the scheduler's
// explanation. It says what Text says, from the same plan. Everything from
// a machine or a file is made safe for markdown and HTML (mdText), so a
// host name or an error cannot add links, images or markup to the comment.
func Markdown(w io.Writer, p *reconcile.Plan) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, MarkdownMarker)
	fmt.Fprintf(bw, "### %s\n\n", mdText(SummaryLine(p)))
	fmt.Fprintf(bw, "%s\n", mdText(refreshWords(p)))
	for _, h := range p.Refresh.Problems {
		msg := strings.ReplaceAll(h.Status, "_", " ")
		if h.Error != "" {
			msg += ": " + h.Error
		}
		fmt.Fprintf(bw, "- :warning: **%s**: %s\n", mdText(h.Host), mdText(msg))
	}
	fmt.Fprintln(bw)
	writeMarkdownRuns(bw, p)

	var changed []reconcile.JobChange
	for _, c := range p.Jobs {
		if c.Action != reconcile.ActionNoOp {
			changed = append(changed, c)
		}
	}
	if len(changed) > 0 {
		fmt.Fprintln(bw, "| | job | action | shape | why |")
		fmt.Fprintln(bw, "|---|---|---|---|---|")
		for _, c := range changed {
			var codes []string
			for _, r := range c.Reasons {
				codes = append(codes, string(r.Code))
			}
			fmt.Fprintf(bw, "| %s | %s | %s | %s | %s |\n", mdSymbol(c.Action), mdText(c.Job), mdText(string(c.Action)),
				mdText(shapeWords(c)), mdText(strings.Join(codes, ", ")))
		}
		fmt.Fprintln(bw)
	}
	for _, c := range changed {
		writeMarkdownJob(bw, c)
	}
	for _, l := range p.Leftovers {
		if l.Reachable {
			fmt.Fprintf(bw, "- %s run %s of job **%s** will be stopped (left over from a stop that could not reach every host: %s)\n",
				mdSymbol(reconcile.ActionDestroy), mdText(l.RunID), mdText(l.Job), mdText(nodeWords(l.Nodes)))
		}
	}
	for _, f := range p.Fleets {
		fmt.Fprintf(bw, "- fleet **%s** (%s): %s\n", mdText(f.Fleet), mdText(f.Provider), mdText(fleetWords(f)))
		for _, m := range f.Machines {
			line := "machine " + m.Name
			if m.Detail != "" {
				line += " (" + m.Detail + ")"
			}
			fmt.Fprintf(bw, "  - %s %s: %s\n", mdSymbol(m.Action), mdText(line), mdText(reasonWords(m.Reasons)))
		}
		if len(f.PlacedByZone) > 0 {
			fmt.Fprintf(bw, "  - %s\n", mdText(placedByZoneWords(f)))
		}
		if f.Note != "" {
			fmt.Fprintf(bw, "  - %s\n", mdText(f.Note))
		}
	}
	if len(p.Leftovers)+len(p.Fleets) > 0 {
		fmt.Fprintln(bw)
	}
	if len(p.Warnings) > 0 {
		fmt.Fprintln(bw, "**Warnings**")
		fmt.Fprintln(bw)
		for _, w := range p.Warnings {
			fmt.Fprintf(bw, "- %s\n", mdText(w))
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintf(bw, "<sub>plan of state serial %d, lineage %s; gpulayer %s</sub>\n",
		p.State.Serial, mdText(orNone(p.State.Lineage)), mdText(orNone(p.GpulayerVersion)))
	return bw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// writeMarkdownJob writes one changed job's collapsible section.
func writeMarkdownJob(w *bufio.Writer, c reconcile.JobChange) {
	fmt.Fprintf(w, "<details><summary>%s job <b>%s</b> %s</summary>\n\n", mdSymbol(c.Action), mdText(c.Job), mdText(verbs[c.Action]))
	for _, r := range c.Reasons {
		fmt.Fprintf(w, "- **%s**: %s\n", mdText(string(r.Code)), mdText(r.Message))
		if len(r.LogTail) > 0 {
			fmt.Fprintln(w, "  <br>log ends with:")
			for _, l := range r.LogTail {
				fmt.Fprintf(w, "  <br>&nbsp;&nbsp;%s\n", mdText(l))
			}
		}
	}
	if c.StopPrior && c.Prior != nil {
		fmt.Fprintf(w, "- stops %s\n", mdText(priorWords(c.Prior)))
	}
	if c.Decision != nil && c.Decision.Status == placement.StatusPlaced {
		fmt.Fprintf(w, "- %s\n", mdText(c.Decision.Summary))
		if c.Placement != nil && c.Placement.Cost != nil {
			if s := costWords(c.Placement.Cost); s != "" {
				fmt.Fprintf(w, "- %s\n", mdText(s))
			}
			for _, r := range c.Placement.Cost.Rejected {
				fmt.Fprintf(w, "- passed over %s\n", mdText(rejectedWords(r)))
			}
		}
	}
	if l := waitLine(c); l != "" {
		fmt.Fprintf(w, "- %s\n", mdText(l))
	}
	if c.Placement != nil && c.Action != reconcile.ActionNoOp {
		if c.Action == reconcile.ActionWaiting {
			fmt.Fprintln(w, "- keeps running as launched, on:")
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| node | host | address | GPUs | links |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, n := range c.Placement.Nodes {
			addr := n.Address
			if n.Port != 0 {
				addr = net.JoinHostPort(n.Address, strconv.Itoa(n.Port))
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s |\n", n.Rank, mdText(n.Host), mdText(addr), mdText(gpuWords(n.GPUs)), mdText(linkWords(n)))
		}
	}
	if c.Decision != nil && c.Decision.Explanation != nil {
		e := c.Decision.Explanation
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%s considered, %d needed", mdText(workersWord(e.Workers)), e.Needed)
		if s := exclusionWords(e.Excluded); s != "" {
			fmt.Fprintf(w, "; left out: %s", mdText(s))
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| level | group | torch | eligible | free | needed | |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
		for _, l := range e.Levels {
			if len(l.Buckets) == 0 {
				fmt.Fprintf(w, "| %s | (no group) | | | | | |\n", mdText(l.Level.String()))
			}
			for _, b := range l.Buckets {
				where := b.Location.String()
				if where == "" {
					where = "(no location)"
				}
				fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %s |\n", mdText(l.Level.String()), mdText(where),
					mdText(orNone(b.TorchVersion)), b.Eligible, b.Free, b.Needed, mdText(b.Choice))
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "</details>")
	fmt.Fprintln(w)
}

// refreshWords says where the plan's facts came from, in one line.
func refreshWords(p *reconcile.Plan) string {
	r := p.Refresh
	var s string
	switch r.Source {
	case reconcile.RefreshProbe:
		s = "Probed " + hosts(r.Hosts) + " over SSH"
	case reconcile.RefreshState:
		s = "Facts saved in state for " + hosts(r.Hosts) + " (no refresh)"
	case reconcile.RefreshFile:
		s = "Facts from " + r.File + " for " + hosts(r.Hosts) + " (no SSH)"
	default:
		s = hosts(r.Hosts) + " declared"
	}
	if len(r.Problems) > 0 {
		return fmt.Sprintf("%s: %d usable, %d not:", s, r.Usable, len(r.Problems))
	}
	return s + "."
}

// shapeWords writes "2 × 4 GPUs, torchrun, policy tight", or "2 nodes,
// no GPUs, plain" for a CPU-only job ("2 × 0 GPUs" reads as a mistake).
func shapeWords(c reconcile.JobChange) string {
	var shape string
	switch {
	case c.GPUsPerNode == 0 && c.Nodes == 1:
		shape = "1 node, no GPUs"
	case c.GPUsPerNode == 0:
		shape = fmt.Sprintf("%d nodes, no GPUs", c.Nodes)
	case c.GPUsPerNode == 1:
		shape = fmt.Sprintf("%d × 1 GPU", c.Nodes)
	default:
		shape = fmt.Sprintf("%d × %d GPUs", c.Nodes, c.GPUsPerNode)
	}
	if c.Launcher != "" {
		shape += ", " + c.Launcher
	}
	if c.Policy != "" {
		shape += ", policy " + c.Policy
	}
	return shape
}

// mdSymbol is an action's mark as literal text in markdown.
func mdSymbol(a reconcile.Action) string {
	switch a {
	case reconcile.ActionCreate:
		return "<code>+</code>"
	case reconcile.ActionDestroy:
		return "<code>-</code>"
	case reconcile.ActionReplace:
		return "<code>-/+</code>"
	case reconcile.ActionWaiting:
		return "<code>…</code>"
	case reconcile.ActionFailed:
		return "<code>!</code>"
	case reconcile.ActionStop:
		return "<code>-</code>"
	}
	return ""
}

// writeMarkdownRuns lists the jobs left as they are whose runs ended or
// cannot be seen, as the text view's writeRuns does.
func writeMarkdownRuns(w *bufio.Writer, p *reconcile.Plan) {
	wrote := false
	for _, c := range p.Jobs {
		r := c.Run
		if c.Action != reconcile.ActionNoOp || r == nil || r.State == reconcile.RunRunning {
			continue
		}
		mark := map[string]string{state.JobSucceeded: "<code>✓</code>", state.JobRestarting: "<code>↻</code>", reconcile.RunUnknown: "<code>?</code>"}[r.State]
		if mark == "" {
			mark = "<code>!</code>"
		}
		line := fmt.Sprintf("- %s job **%s** %s%s", mark, mdText(c.Job), mdText(r.State), mdText(agoWords(r.EndedAt, p.MadeAt)+ranWords(r)))
		if r.Message != "" {
			line += ": " + mdText(r.Message)
		}
		if r.State == state.JobFailed || r.State == state.JobLost {
			line += " (run it again with `gpulayer apply --replace job." + mdText(c.Job) + "`)"
		}
		fmt.Fprintln(w, line)
		wrote = true
	}
	if wrote {
		fmt.Fprintln(w)
	}
}

// mdText makes text safe inside a markdown comment, table cells and HTML
// blocks included: control characters replaced (iostreams.Sanitize, on one
// line), HTML escaped, and every character markdown gives a meaning to
// backslash-escaped, so nothing a machine reports becomes a link, an
// image, a mention's formatting, a table column or a tag.
func mdText(s string) string {
	s = iostreams.Sanitize(s, false)
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]()#+-.!|~=:", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return htmlEscaper.Replace(b.String())
}

// htmlEscaper escapes what would start a tag or an entity; quotes need no
// escaping outside attributes.
var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
