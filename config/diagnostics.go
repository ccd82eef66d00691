package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/hashicorp/hcl/v2"
	"github.com/muesli/termenv"

	"github.com/gpulayer/gpulayer/internal/iostreams"
)

// RenderOptions says how diagnostics look. The caller decides colour (from
// the terminal, NO_COLOR and --no-color); this package never looks.
type RenderOptions struct {
	Color bool
}

// WriteDiagnostics writes diags in Terraform's shape:
//
//	Error: Unknown policy
//
//	  on jobs.hcl line 17, in job "train":
//	  17:   policy = policy.tigth
//	                 ^^^^^^^^^^^^
//
//	No policy "tigth" is declared. Did you mean "tight"?
//
// files supplies the source lines; a diagnostic whose file is not there is
// written without a snippet. Everything that came from a file is sanitized.
func WriteDiagnostics(w io.Writer, diags hcl.Diagnostics, files map[string]*hcl.File, opts RenderOptions) error {
	st := newStyles(opts.Color)
	bw := bufio.NewWriter(w)
	for _, d := range diags {
		writeDiagnostic(bw, d, files, st)
	}
	return bw.Flush()
}

type styles struct {
	err, warn, summary, mark lipgloss.Style
}

func newStyles(color bool) styles {
	r := lipgloss.NewRenderer(io.Discard)
	if color {
		r.SetColorProfile(termenv.ANSI)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	return styles{
		err:     r.NewStyle().Bold(true).Foreground(lipgloss.Color("1")),
		warn:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("3")),
		summary: r.NewStyle().Bold(true),
		mark:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("1")),
	}
}

func writeDiagnostic(w *bufio.Writer, d *hcl.Diagnostic, files map[string]*hcl.File, st styles) {
	label := st.err.Render("Error:")
	if d.Severity == hcl.DiagWarning {
		label = st.warn.Render("Warning:")
	}
	fmt.Fprintf(w, "%s %s\n\n", label, st.summary.Render(clean(d.Summary)))
	if d.Subject != nil {
		writeSnippet(w, d.Subject, files, st)
	}
	if d.Detail != "" {
		fmt.Fprintf(w, "%s\n\n", iostreams.Sanitize(d.Detail, true))
	}
}

// writeSnippet writes the "on FILE line N, in BLOCK:" header and, when the
// file's source is known, the line with the range marked: underlined with
// colour (bold red; lipgloss underlines rune by rune), by carets under it
// without.
func writeSnippet(w *bufio.Writer, rng *hcl.Range, files map[string]*hcl.File, st styles) {
	f := files[rng.Filename]
	context := ""
	if f != nil && f.Nav != nil {
		if cs, ok := f.Nav.(interface{ ContextString(int) string }); ok {
			if c := cs.ContextString(rng.Start.Byte); c != "" {
				context = ", in " + clean(c)
			}
		}
	}
	fmt.Fprintf(w, "  on %s line %d%s:\n", clean(rng.Filename), rng.Start.Line, context)
	line, ok := sourceLine(f, rng.Start.Line)
	if !ok {
		w.WriteString("\n")
		return
	}
	start := rng.Start.Column - 1
	end := len(line)
	if rng.End.Line == rng.Start.Line {
		end = rng.End.Column - 1
	}
	// Columns are counted in characters; clamp them to the line so that a
	// range from a malformed file cannot slice outside it.
	runes := []rune(line)
	start = max(0, min(start, len(runes)))
	end = max(start, min(end, len(runes)))
	if end == start && start < len(runes) {
		end = start + 1
	}
	runes, start, end = snippetWindow(runes, start, end)
	before, marked, after := string(runes[:start]), string(runes[start:end]), string(runes[end:])
	prefix := fmt.Sprintf("%4d: ", rng.Start.Line)
	if isStyled(st) {
		fmt.Fprintf(w, "%s%s%s%s\n\n", prefix, clean(before), st.mark.Render(clean(marked)), clean(after))
		return
	}
	fmt.Fprintf(w, "%s%s\n", prefix, clean(before+marked+after))
	fmt.Fprintf(w, "%s%s%s\n\n", strings.Repeat(" ", len(prefix)+utf8.RuneCountInString(clean(before))),
		strings.Repeat("^", max(1, utf8.RuneCountInString(clean(marked)))), "")
}

// maxSnippetRunes is the widest source line a diagnostic shows: a
// generated or minified file can be one line of a megabyte, and a snippet
// of it would be a megabyte of text and another of carets.
const maxSnippetRunes = 160

// snippetWindow cuts a long line to maxSnippetRunes around the marked
// range [start, end), with "..." where it was cut, and returns the range's
// place in the cut line. A mark wider than the window is cut too.
func snippetWindow(runes []rune, start, end int) ([]rune, int, int) {
	if len(runes) <= maxSnippetRunes {
		return runes, start, end
	}
	from := max(0, start-maxSnippetRunes/4)
	to := min(len(runes), from+maxSnippetRunes)
	from = max(0, to-maxSnippetRunes)
	out := make([]rune, 0, maxSnippetRunes+6)
	lead := 0
	if from > 0 {
		out = append(out, '.', '.', '.')
		lead = 3
	}
	out = append(out, runes[from:to]...)
	if to < len(runes) {
		out = append(out, '.', '.', '.')
	}
	start = lead + start - from
	end = lead + min(end, to) - from
	return out, start, end
}

// isStyled reports whether the styles emit escape sequences at all.
func isStyled(st styles) bool { return st.summary.Render("x") != "x" }

// sourceLine is line n (1-based) of f's source, without its newline.
func sourceLine(f *hcl.File, n int) (string, bool) {
	if f == nil || n < 1 {
		return "", false
	}
	src := f.Bytes
	for i := 1; i < n; i++ {
		nl := bytes.IndexByte(src, '\n')
		if nl < 0 {
			return "", false
		}
		src = src[nl+1:]
	}
	if nl := bytes.IndexByte(src, '\n'); nl >= 0 {
		src = src[:nl]
	}
	return strings.TrimSuffix(string(src), "\r"), true
}

// clean makes file text printable on one line: tabs become a space (so
// carets stay aligned), other control bytes are replaced.
func clean(s string) string {
	return iostreams.Sanitize(strings.ReplaceAll(s, "\t", " "), false)
}

// Report is the JSON form of a validation: `gpulayer validate --json`.
type Report struct {
	Valid        bool               `json:"valid"`
	ErrorCount   int                `json:"error_count"`
	WarningCount int                `json:"warning_count"`
	Diagnostics  []ReportDiagnostic `json:"diagnostics"`
}

// ReportDiagnostic is one diagnostic of a Report.
type ReportDiagnostic struct {
	Severity string       `json:"severity"` // "error" or "warning"
	Summary  string       `json:"summary"`
	Detail   string       `json:"detail"`
	Range    *ReportRange `json:"range,omitempty"`
}

// ReportRange is a source range; lines and columns count from 1, bytes
// from 0, and end is exclusive.
type ReportRange struct {
	Filename string    `json:"filename"`
	Start    ReportPos `json:"start"`
	End      ReportPos `json:"end"`
}

// ReportPos is a position in a file.
type ReportPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// NewReport summarises diags; the configuration is valid when none is an
// error (warnings do not make it invalid).
func NewReport(diags hcl.Diagnostics) Report {
	r := Report{Diagnostics: []ReportDiagnostic{}}
	for _, d := range diags {
		rd := ReportDiagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			rd.Severity = "warning"
			r.WarningCount++
		} else {
			r.ErrorCount++
		}
		if s := d.Subject; s != nil {
			rd.Range = &ReportRange{
				Filename: s.Filename,
				Start:    ReportPos{Line: s.Start.Line, Column: s.Start.Column, Byte: s.Start.Byte},
				End:      ReportPos{Line: s.End.Line, Column: s.End.Column, Byte: s.End.Byte},
			}
		}
		r.Diagnostics = append(r.Diagnostics, rd)
	}
	r.Valid = r.ErrorCount == 0
	return r
}

// WriteDiagnosticsJSON writes NewReport(diags) as indented JSON.
func WriteDiagnosticsJSON(w io.Writer, diags hcl.Diagnostics) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(NewReport(diags))
}

// maxDiagnosticsPerFile is how many diagnostics of one file are shown. A
// binary or badly broken file can yield one per byte, hundreds of megabytes
// of text that nobody reads; the first ones are what a person fixes.
const maxDiagnosticsPerFile = 20

// capPerFile keeps the first maxDiagnosticsPerFile diagnostics of each
// file and replaces the rest by one that counts them. diags must be sorted
// (sortDiagnostics), so that those of a file are together.
func capPerFile(diags hcl.Diagnostics) hcl.Diagnostics {
	out := diags[:0:0]
	for i := 0; i < len(diags); {
		name := ""
		if diags[i].Subject != nil {
			name = diags[i].Subject.Filename
		}
		j := i
		for j < len(diags) && diags[j].Subject != nil && diags[j].Subject.Filename == name {
			j++
		}
		if j == i { // no range: not a file's, never capped
			out = append(out, diags[i])
			i++
			continue
		}
		if j-i <= maxDiagnosticsPerFile {
			out = append(out, diags[i:j]...)
			i = j
			continue
		}
		out = append(out, diags[i:i+maxDiagnosticsPerFile]...)
		errs, warns := 0, 0
		for _, d := range diags[i+maxDiagnosticsPerFile : j] {
			if d.Severity == hcl.DiagError {
				errs++
			} else {
				warns++
			}
		}
		more := &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "More problems not shown",
			Detail: fmt.Sprintf("...and %d more in %s (%d errors, %d warnings), not shown: gpulayer shows at most %d per file. Fix the ones above and run again.",
				j-i-maxDiagnosticsPerFile, name, errs, warns, maxDiagnosticsPerFile),
		}
		if errs > 0 {
			more.Severity = hcl.DiagError
		}
		out = append(out, more)
		i = j
	}
	return out
}
