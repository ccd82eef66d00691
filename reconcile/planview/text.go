package planview

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

// Options change how a plan looks, never what it says.
type Options struct {
	// Color turns on lipgloss styles; the caller decides (a terminal, no
	// NO_COLOR, no --no-color).
	Color bool
}

// styles are the looks of the symbols and headings; all plain when colour
// is off.
type styles struct {
	create, destroy, replace, wait, fail, bold, dim lipgloss.Style
}

func newStyles(w io.Writer, color bool) styles {
	if !color {
		return styles{}
	}
	r := lipgloss.NewRenderer(w)
	r.SetColorProfile(termenv.ANSI)
	return styles{
		create:  r.NewStyle().Foreground(lipgloss.Color("2")),
		destroy: r.NewStyle().Foreground(lipgloss.Color("1")),
		replace: r.NewStyle().Foreground(lipgloss.Color("3")),
		wait:    r.NewStyle().Foreground(lipgloss.Color("6")),
		fail:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("1")),
		bold:    r.NewStyle().Bold(true),
		dim:     r.NewStyle().Faint(true),
	}
}

// symbol is a job action's mark, Terraform's where it has one.
func (st styles) symbol(a reconcile.Action) string {
	switch a {
	case reconcile.ActionCreate:
		return st.create.Render("+")
	case reconcile.ActionDestroy:
		return st.destroy.Render("-")
	case reconcile.ActionReplace:
		return st.replace.Render("-/+")
	case reconcile.ActionWaiting:
		return st.wait.Render("…")
	case reconcile.ActionFailed:
		return st.fail.Render("!")
	case reconcile.ActionStop:
		return st.destroy.Render("-")
	}
	return " "
}

// verbs are what each action does to a job, in a sentence.
var verbs = map[reconcile.Action]string{
	reconcile.ActionCreate:  "will be launched",
	reconcile.ActionReplace: "will be replaced",
	reconcile.ActionDestroy: "will be stopped",
	reconcile.ActionWaiting: "is waiting",
	reconcile.ActionFailed:  "cannot be placed",
	reconcile.ActionNoOp:    "is unchanged",
	reconcile.ActionStop:    "ended: its other nodes will be stopped",
}

// Text writes the human view of a plan. Everything that came from a
// machine or a file goes through iostreams.Sanitize.
func Text(w io.Writer, p *reconcile.Plan, opts Options) error {
	bw := bufio.NewWriter(w)
	st := newStyles(w, opts.Color)
	writeRefresh(bw, p)
	writeRuns(bw, p, st)
	var changed []reconcile.JobChange
	for _, c := range p.Jobs {
		if c.Action != reconcile.ActionNoOp {
			changed = append(changed, c)
		}
	}
	if len(changed) > 0 || len(p.Fleets) > 0 || p.Summary.Leftovers > 0 {
		fmt.Fprintln(bw)
		fmt.Fprintln(bw, "gpulayer will make these changes:")
	}
	for _, c := range changed {
		fmt.Fprintln(bw)
		writeJob(bw, c, st)
	}
	for _, l := range p.Leftovers {
		if !l.Reachable {
			continue
		}
		fmt.Fprintln(bw)
		fmt.Fprintf(bw, "  %s %s will be stopped\n", st.symbol(reconcile.ActionDestroy),
			st.bold.Render("run "+clean(l.RunID)+" of job "+strconv.Quote(clean(l.Job))))
		fmt.Fprintf(bw, "      left over from a stop that could not reach every host: %s\n",
			clean(nodeWords(l.Nodes)))
	}
	for _, f := range p.Fleets {
		fmt.Fprintln(bw)
		writeFleet(bw, f, st)
	}
	if len(p.Warnings) > 0 {
		fmt.Fprintln(bw)
		fmt.Fprintln(bw, "Warnings:")
		for _, w := range p.Warnings {
			fmt.Fprintf(bw, "  - %s\n", clean(w))
		}
	}
	fmt.Fprintln(bw)
	fmt.Fprintln(bw, st.bold.Render(SummaryLine(p)))
	return bw.Flush()
}

// SummaryLine is the plan's last line: "Plan: 2 to launch, 1 to replace,
// 1 to stop, 1 waiting." or "No changes. Your jobs match the
// configuration."
func SummaryLine(p *reconcile.Plan) string {
	s := p.Summary
	var tail []string
	if s.Waiting > 0 {
		tail = append(tail, fmt.Sprintf("%d waiting", s.Waiting))
	}
	if s.Failed > 0 {
		tail = append(tail, fmt.Sprintf("%d failed", s.Failed))
	}
	if !p.HasChanges() {
		if len(tail) == 0 {
			return "No changes. Your jobs match the configuration."
		}
		return "No changes to apply; " + strings.Join(tail, ", ") + "."
	}
	parts := []string{
		fmt.Sprintf("%d to launch", s.Launch),
		fmt.Sprintf("%d to replace", s.Replace),
		fmt.Sprintf("%d to stop", s.Stop),
	}
	if s.Leftovers > 0 {
		parts = append(parts, fmt.Sprintf("%d leftover runs to stop", s.Leftovers))
	}
	if s.CreateMachines+s.DeleteMachines > 0 {
		parts = append(parts, fmt.Sprintf("%d machines to create, %d to delete", s.CreateMachines, s.DeleteMachines))
	}
	return "Plan: " + strings.Join(append(parts, tail...), ", ") + "."
}

func writeRefresh(w *bufio.Writer, p *reconcile.Plan) {
	r := p.Refresh
	switch r.Source {
	case reconcile.RefreshProbe:
		fmt.Fprintf(w, "Probed %s over SSH", hosts(r.Hosts))
	case reconcile.RefreshState:
		fmt.Fprintf(w, "Using the facts saved in state for %s (no refresh)", hosts(r.Hosts))
	case reconcile.RefreshFile:
		fmt.Fprintf(w, "Using the facts in %s for %s (no SSH)", clean(r.File), hosts(r.Hosts))
	default:
		fmt.Fprintf(w, "%s declared", hosts(r.Hosts))
	}
	if len(r.Problems) == 0 {
		fmt.Fprintln(w, ".")
		return
	}
	fmt.Fprintf(w, ": %d usable, %d not:\n", r.Usable, len(r.Problems))
	for _, h := range r.Problems {
		msg := strings.ReplaceAll(h.Status, "_", " ")
		if h.Error != "" {
			msg += ": " + h.Error
		}
		fmt.Fprintf(w, "  ! %s: %s\n", clean(h.Host), clean(msg))
	}
}

func hosts(n int) string {
	if n == 1 {
		return "1 host"
	}
	return strconv.Itoa(n) + " hosts"
}

func writeJob(w *bufio.Writer, c reconcile.JobChange, st styles) {
	fmt.Fprintf(w, "  %s %s %s\n", st.symbol(c.Action), st.bold.Render("job "+strconv.Quote(c.Job)), verbs[c.Action])
	fmt.Fprintf(w, "      %s\n", st.dim.Render(clean(shapeWords(c))))
	for i, r := range c.Reasons {
		lead := "why: "
		if i > 0 {
			lead = "     "
		}
		fmt.Fprintf(w, "      %s%s: %s\n", lead, r.Code, clean(r.Message))
		for _, l := range r.LogTail {
			fmt.Fprintf(w, "             | %s\n", clean(l))
		}
	}
	if c.Run != nil && (c.Action == reconcile.ActionStop || c.Run.Restart) {
		writeNodeEnds(w, c.Run)
	}
	if c.StopPrior && c.Prior != nil {
		fmt.Fprintf(w, "      stops %s\n", clean(priorWords(c.Prior)))
	}
	if c.Decision != nil && c.Decision.Status == placement.StatusPlaced {
		fmt.Fprintf(w, "      %s\n", clean(c.Decision.Summary))
		if c.Placement != nil && c.Placement.Cost != nil {
			if s := costWords(c.Placement.Cost); s != "" {
				fmt.Fprintf(w, "      %s\n", clean(s))
			}
			for _, r := range c.Placement.Cost.Rejected {
				fmt.Fprintf(w, "      passed over %s\n", clean(rejectedWords(r)))
			}
		}
	}
	if l := waitLine(c); l != "" {
		fmt.Fprintf(w, "      %s\n", clean(l))
	}
	switch {
	case c.Placement == nil || c.Action == reconcile.ActionNoOp:
	case c.Action == reconcile.ActionWaiting:
		fmt.Fprintln(w, "      keeps running as launched, on:")
		writeNodes(w, c.Placement)
	default:
		writeNodes(w, c.Placement)
	}
	if c.Decision != nil && c.Decision.Explanation != nil {
		writeExplanation(w, c.Decision.Explanation)
	}
}

// writeRuns lists the jobs left as they are whose runs ended or cannot be
// seen: "✓ job "eval" succeeded 2h ago, ran 41m, 2/2 nodes exit 0", "!
// job "train" failed ..." with how each node ended and how to run it
// again, "↻ job "train" restarting at ...", "? job "train": ...".
func writeRuns(w *bufio.Writer, p *reconcile.Plan, st styles) {
	first := true
	for _, c := range p.Jobs {
		r := c.Run
		if c.Action != reconcile.ActionNoOp || r == nil || r.State == reconcile.RunRunning {
			continue
		}
		if first {
			fmt.Fprintln(w)
			first = false
		}
		name := st.bold.Render("job " + strconv.Quote(c.Job))
		switch r.State {
		case state.JobSucceeded:
			fmt.Fprintf(w, "  %s %s succeeded%s%s, %s\n", st.create.Render("✓"), name, agoWords(r.EndedAt, p.MadeAt), ranWords(r), clean(r.Message))
		case state.JobRestarting:
			fmt.Fprintf(w, "  %s %s restarting%s: %s\n", st.wait.Render("↻"), name, atWords(r.RestartAt, p.MadeAt), clean(r.Message))
		case reconcile.RunUnknown:
			fmt.Fprintf(w, "  %s %s: %s\n", st.wait.Render("?"), name, clean(r.Message))
		default: // failed, lost
			fmt.Fprintf(w, "  %s %s %s%s%s: %s\n", st.fail.Render("!"), name, r.State, agoWords(r.EndedAt, p.MadeAt), ranWords(r), clean(r.Message))
			writeNodeEnds(w, r)
			fmt.Fprintf(w, "      run it again with: gpulayer apply --replace job.%s\n", clean(c.Job))
		}
	}
}

// writeNodeEnds says how each node that ended ended, with its log's end.
func writeNodeEnds(w *bufio.Writer, r *reconcile.RunReport) {
	for _, e := range r.Nodes {
		fmt.Fprintf(w, "      node %d: %s\n", e.Rank, endWords(e))
		tail := e.LogTail
		if len(tail) > 5 {
			tail = tail[len(tail)-5:]
		}
		for _, l := range tail {
			fmt.Fprintf(w, "        | %s\n", clean(l))
		}
	}
}

func endWords(e state.NodeEnd) string {
	switch {
	case e.Lost:
		return "vanished without an exit status"
	case e.Signal != "" && e.ExitStatus != nil:
		return fmt.Sprintf("killed by SIG%s (status %d)", e.Signal, *e.ExitStatus)
	case e.ExitStatus != nil:
		return fmt.Sprintf("exit %d", *e.ExitStatus)
	}
	return "ended"
}

// agoWords is " 2h ago" from the time a run ended to the plan's.
func agoWords(t *time.Time, now time.Time) string {
	if t == nil || now.IsZero() {
		return ""
	}
	return " " + shortDuration(now.Sub(*t)) + " ago"
}

func atWords(t *time.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	if d := t.Sub(now); d > 0 && !now.IsZero() {
		return " in " + shortDuration(d)
	}
	return " now"
}

// ranWords is ", ran 41m": how long the run lasted.
func ranWords(r *reconcile.RunReport) string {
	if r.EndedAt == nil || r.LaunchedAt.IsZero() {
		return ""
	}
	return ", ran " + shortDuration(r.EndedAt.Sub(r.LaunchedAt))
}

// shortDuration is a duration in its largest unit or two: 45s, 41m, 2h,
// 3d.
func shortDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// priorWords names what stop will end: "run r-1a2b: a1 pid 4211, a2 pid
// 4302".
func priorWords(p *reconcile.PriorJob) string {
	out := "run " + p.RunID
	if p.RunID == "" {
		out = "what was started"
	}
	if s := nodeWords(p.Nodes); s != "" {
		out += ": " + s
	}
	return out
}

// nodeWords writes "a1 pid 4211, a2 pid 4302 (exited)".
func nodeWords(ns []reconcile.PriorNode) string {
	var nodes []string
	for _, n := range ns {
		s := n.Host
		if n.PID > 0 {
			s += " pid " + strconv.Itoa(n.PID)
		}
		if n.Alive != nil && !*n.Alive {
			s += " (exited)"
		}
		nodes = append(nodes, s)
	}
	return strings.Join(nodes, ", ")
}

func writeNodes(w *bufio.Writer, pl *reconcile.Placement) {
	rows := make([][]string, 0, len(pl.Nodes))
	for _, n := range pl.Nodes {
		addr := n.Address
		if n.Port != 0 {
			addr = net.JoinHostPort(n.Address, strconv.Itoa(n.Port))
		}
		rows = append(rows, []string{
			"node " + strconv.Itoa(n.Rank), clean(n.Host), clean(addr), gpuWords(n.GPUs), linkWords(n),
		})
	}
	writeColumns(w, "      ", rows)
}

// gpuWords writes "GPU 3" or "GPUs 4-7"; "no GPUs" for a CPU-only node.
// GPUs come in local-rank order (CUDA_VISIBLE_DEVICES'); an order that is
// not ascending is written out in full ("GPUs 0,3,2,1"), as ranges would
// hide it.
func gpuWords(gpus []int) string {
	switch {
	case len(gpus) == 0:
		return "no GPUs"
	case len(gpus) == 1:
		return "GPU " + strconv.Itoa(gpus[0])
	case !slices.IsSorted(gpus):
		ids := make([]string, len(gpus))
		for i, g := range gpus {
			ids[i] = strconv.Itoa(g)
		}
		return "GPUs " + strings.Join(ids, ",")
	}
	return "GPUs " + topology.FormatList(gpus)
}

// linkWords writes "NV12, NUMA 1".
func linkWords(n reconcile.PlacedNode) string {
	var parts []string
	if n.Bottleneck != "" {
		parts = append(parts, n.Bottleneck)
	}
	if n.NUMA != "" {
		parts = append(parts, "NUMA "+n.NUMA)
	}
	return strings.Join(parts, ", ")
}

// writeColumns writes rows with each column padded to its widest cell.
func writeColumns(w *bufio.Writer, indent string, rows [][]string) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], lipgloss.Width(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-lipgloss.Width(c)+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// writeExplanation writes how the scheduler decided: who was left out,
// and per level tried each bucket's eligible, free and needed workers.
func writeExplanation(w *bufio.Writer, e *placement.Explanation) {
	fmt.Fprintf(w, "      %s considered, %d needed\n", workersWord(e.Workers), e.Needed)
	if s := exclusionWords(e.Excluded); s != "" {
		fmt.Fprintf(w, "      left out: %s\n", s)
	}
	for _, l := range e.Levels {
		fmt.Fprintf(w, "      level %s:", l.Level)
		if s := exclusionWords(l.Excluded); s != "" {
			fmt.Fprintf(w, " left out: %s", s)
		}
		if len(l.Buckets) == 0 {
			fmt.Fprint(w, " no group")
		}
		fmt.Fprintln(w)
		rows := make([][]string, 0, len(l.Buckets))
		for _, b := range l.Buckets {
			where := b.Location.String()
			if where == "" {
				where = "(no location)"
			}
			torch := "torch " + b.TorchVersion
			if b.TorchVersion == "" {
				torch = "torch unknown"
			}
			row := []string{clean(where), clean(torch),
				fmt.Sprintf("%d eligible, %d free, %d needed", b.Eligible, b.Free, b.Needed)}
			if b.Choice != "" {
				row = append(row, "("+b.Choice+")")
			}
			rows = append(rows, row)
		}
		writeColumns(w, "        ", rows)
	}
}

func workersWord(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return strconv.Itoa(n) + " workers"
}

// exclusionWords writes "3 busy, 1 too_few_gpus".
func exclusionWords(ex []placement.Exclusion) string {
	parts := make([]string, 0, len(ex))
	for _, x := range ex {
		parts = append(parts, fmt.Sprintf("%d %s", x.Workers, x.Reason))
	}
	return strings.Join(parts, ", ")
}

func writeFleet(w *bufio.Writer, f reconcile.FleetChange, st styles) {
	fmt.Fprintf(w, "  %s: %s\n", st.bold.Render("fleet "+strconv.Quote(clean(f.Fleet))+" ("+clean(f.Provider)+")"), fleetWords(f))
	for _, m := range f.Machines {
		fmt.Fprintf(w, "    %s machine %s", st.symbol(m.Action), clean(m.Name))
		if m.Detail != "" {
			fmt.Fprintf(w, " (%s)", clean(m.Detail))
		}
		fmt.Fprintf(w, ": %s\n", clean(reasonWords(m.Reasons)))
	}
	if len(f.PlacedByZone) > 0 {
		fmt.Fprintf(w, "      %s\n", clean(placedByZoneWords(f)))
	}
	if f.Note != "" {
		fmt.Fprintf(w, "      %s\n", clean(f.Note))
	}
}

// placedByZoneWords is "no physical host topology reported for cloud-0,
// cloud-1; placed by zone, not by block".
func placedByZoneWords(f reconcile.FleetChange) string {
	return "no physical host topology reported for " + strings.Join(f.PlacedByZone, ", ") + "; placed by zone, not by block"
}

// fleetWords is "2 of 4 machines exist; 2 to create, 1 to delete".
func fleetWords(f reconcile.FleetChange) string {
	var create, del int
	for _, m := range f.Machines {
		switch m.Action {
		case reconcile.ActionCreate:
			create++
		case reconcile.ActionDestroy:
			del++
		case reconcile.ActionReplace:
			create++
			del++
		}
	}
	s := fmt.Sprintf("%d of %d machines exist", f.Existing, f.Count)
	if create+del > 0 {
		s += fmt.Sprintf("; %d to create, %d to delete", create, del)
	}
	if !f.Listed {
		s += " (as state records them; not listed at this refresh)"
	}
	return s
}

// reasonWords joins reasons' messages.
func reasonWords(rs []reconcile.Reason) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, r.Message)
	}
	return strings.Join(parts, "; ")
}

// clean makes text from machines and files safe for a terminal, on one
// line.
func clean(s string) string { return iostreams.Sanitize(s, false) }
