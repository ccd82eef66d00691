package factsview

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/reconcile/facts"
)

// styles are the table's looks; all empty when colour is off.
type styles struct {
	header, ok, warn, bad lipgloss.Style
}

func newStyles(w io.Writer, color bool) styles {
	if !color {
		return styles{}
	}
	// The caller has decided that colour is on, so the renderer is told
	// so rather than left to guess from the writer, which in tests and
	// pipes-with-FORCE is not a terminal.
	r := lipgloss.NewRenderer(w)
	r.SetColorProfile(termenv.ANSI)
	return styles{
		header: r.NewStyle().Bold(true),
		ok:     r.NewStyle().Foreground(lipgloss.Color("2")),
		warn:   r.NewStyle().Foreground(lipgloss.Color("3")),
		bad:    r.NewStyle().Foreground(lipgloss.Color("1")),
	}
}

// cell is one table cell: its plain text, which sets the column width, and
// the style it is printed in.
type cell struct {
	text  string
	style lipgloss.Style
}

// WriteTable writes the hosts of doc as a table, then one line per host
// error and warning. color turns on lipgloss styles; the caller decides it
// (a terminal, no NO_COLOR, no --no-color).
func WriteTable(w io.Writer, doc *facts.Document, color bool) error {
	st := newStyles(w, color)
	rows := [][]cell{{
		{"HOST", st.header}, {"REGION / ZONE / NETWORK GROUP", st.header}, {"GPUS", st.header},
		{"FREE", st.header}, {"TORCH", st.header}, {"STATUS", st.header},
	}}
	var notes []string
	for i := range doc.Hosts {
		h := &doc.Hosts[i]
		name := clean(h.Name)
		rows = append(rows, []cell{
			{name, lipgloss.Style{}},
			{location(h.Location), lipgloss.Style{}},
			{gpus(h), lipgloss.Style{}},
			{free(h), lipgloss.Style{}},
			{orDash(clean(h.TorchVersion)), lipgloss.Style{}},
			status(h, st),
		})
		if h.Error != "" {
			notes = append(notes, st.bad.Render(name+": "+cleanTo(h.Error, maxNote)))
		}
		for _, wmsg := range h.Warnings {
			notes = append(notes, st.warn.Render(name+": warning: "+cleanTo(wmsg, maxNote)))
		}
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for c, cl := range r {
			widths[c] = max(widths[c], lipgloss.Width(cl.text))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for c, cl := range r {
			text := cl.text
			if c < len(r)-1 {
				text += strings.Repeat(" ", widths[c]-lipgloss.Width(cl.text)+2)
			}
			b.WriteString(cl.style.Render(text))
		}
		b.WriteByte('\n')
	}
	if len(notes) > 0 {
		b.WriteByte('\n')
		for _, n := range notes {
			b.WriteString(n)
			b.WriteByte('\n')
		}
	}
	b.WriteString(summary(doc))
	_, err := io.WriteString(w, b.String())
	return err
}

// summary is the last line: how many hosts answered and their GPUs.
func summary(doc *facts.Document) string {
	ok, gpus, free := 0, 0, 0
	for _, h := range doc.Hosts {
		if h.Status == facts.StatusOK {
			ok++
		}
		gpus += len(h.GPUs)
		free += len(h.FreeGPUs)
	}
	return fmt.Sprintf("\n%d of %d hosts probed, %d GPUs, %d free.\n", ok, len(doc.Hosts), gpus, free)
}

func location(l facts.Location) string {
	parts := []string{orDash(clean(l.Region)), orDash(clean(l.Zone)), orDash(clean(l.NetworkGroup))}
	return strings.Join(parts, " / ")
}

// gpus is "8 × NVIDIA A100-SXM4-80GB", or a count per name for a machine
// with several models, "-" for none.
func gpus(h *facts.Host) string {
	if len(h.GPUs) == 0 {
		return "-"
	}
	var names []string
	count := map[string]int{}
	for _, g := range h.GPUs {
		n := clean(g.Name)
		if count[n] == 0 {
			names = append(names, n)
		}
		count[n]++
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = strconv.Itoa(count[n]) + " × " + n
	}
	return strings.Join(parts, ", ")
}

func free(h *facts.Host) string {
	if h.Status != facts.StatusOK {
		return "-"
	}
	return strconv.Itoa(len(h.FreeGPUs))
}

func status(h *facts.Host, st styles) cell {
	switch {
	case h.Status == facts.StatusOK && len(h.Warnings) == 1:
		return cell{"ok, 1 warning", st.warn}
	case h.Status == facts.StatusOK && len(h.Warnings) > 1:
		return cell{fmt.Sprintf("ok, %d warnings", len(h.Warnings)), st.warn}
	case h.Status == facts.StatusOK:
		return cell{"ok", st.ok}
	}
	return cell{orDash(clean(h.Status)), st.bad}
}

// Bounds of the text of a cell and of a note line, in characters. Parse
// already cuts what a machine reports (docs/facts.md), but a document can
// come from elsewhere, and Sanitize triples the size of control bytes: a 10 MB
// GPU name must not make a table of 30 MB or more.
const (
	maxCell = 256
	maxNote = 1024
)

// clean makes machine-reported text safe for one table cell.
func clean(s string) string { return cleanTo(s, maxCell) }

// cleanTo sanitizes s for one line and cuts it to max characters, the
// last of them "…". The input is cut first, to 4 bytes a character, so
// that a huge value costs no more than a short one.
func cleanTo(s string, max int) string {
	s = iostreams.Sanitize(s[:min(len(s), 4*max+4)], false)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
